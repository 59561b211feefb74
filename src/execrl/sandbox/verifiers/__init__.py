"""Domain verifiers: programs scored by a check beyond unit tests (docs/verifiers.md).

Built in: `verilog` (Icarus Verilog simulation against a reference model's outputs), `sql`
(SQLite result sets, as BIRD/Spider compare them), `chart` (matplotlib figures by data and by
image similarity), `optimize` (feasibility, then the gap to the best known objective) and
`testgen` (a test suite, by the mutants of a reference it rejects and the coverage it gets). A
task names its verifier in its tests (`VerifierTests`, `"verifier": "sql"` in a task file); a
user's own is `"package.module:Class"`, a class with `name`, `jobs` and `verify`.

The runner under `Sandbox.run_many` (`sandbox/runner.py`) routes each job whose tests are
`VerifierTests` to `run.run_verified`, so every caller that runs tasks (rewards, training,
`execrl eval`, `execrl tasks validate`) reaches them.
"""

from __future__ import annotations

import functools
import importlib

from execrl.sandbox.verifiers.base import (
    Verification,
    Verifier,
    VerifierSpecError,
    VerifyRequest,
    verification_of,
)

BUILTIN = {
    "verilog": "execrl.sandbox.verifiers.verilog:VerilogVerifier",
    "sql": "execrl.sandbox.verifiers.sql:SqlVerifier",
    "chart": "execrl.sandbox.verifiers.chart:ChartVerifier",
    "optimize": "execrl.sandbox.verifiers.optimize:OptimizeVerifier",
    "diagram": "execrl.sandbox.verifiers.diagram:DiagramVerifier",
    "testgen": "execrl.sandbox.verifiers.testgen:TestgenVerifier",
    "web": "execrl.sandbox.verifiers.web:WebVerifier",
}

__all__ = [
    "BUILTIN",
    "Verification",
    "Verifier",
    "VerifierSpecError",
    "VerifyRequest",
    "load_verifier",
    "verification_of",
]


@functools.cache
def load_verifier(name: str) -> Verifier:
    """The verifier a task names: a built-in name or "package.module:Class" (made with no
    arguments, once per process). Errors say what was wrong and what is known."""
    target = BUILTIN.get(name, name)
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise VerifierSpecError(
            f"unknown verifier {name!r}; built in: {', '.join(BUILTIN)}, or a class of your "
            "own as 'package.module:Class'"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise VerifierSpecError(f"verifier {name!r}: cannot import {module_name}: {exc}") from exc
    cls = getattr(module, attr, None)
    if cls is None:
        raise VerifierSpecError(f"verifier {name!r}: {module_name} has no {attr!r}")
    verifier = cls()
    if not isinstance(verifier, Verifier):
        raise VerifierSpecError(
            f"verifier {name!r}: {attr} needs a `name`, `jobs(request)` and "
            "`verify(request, runs)` (see docs/verifiers.md)"
        )
    return verifier
