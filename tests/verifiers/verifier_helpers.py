"""Helpers for the verifier tests."""

from __future__ import annotations

import os

import pytest

from execrl.sandbox import Job, Limits
from execrl.sandbox.grading.languages import missing_tools
from execrl.sandbox.verifiers import Verification, verification_of
from execrl.tasks.schema import VerifierTests


def needs_iverilog() -> None:
    """Skip without Icarus Verilog, except in CI (EXECRL_REQUIRE_TOOLS=1, set by .ci/run)."""
    missing = missing_tools("verilog")
    if missing:
        message = f"Icarus Verilog not installed ({missing}): apt-get install iverilog"
        if os.environ.get("EXECRL_REQUIRE_TOOLS") == "1":
            pytest.fail(message)
        pytest.skip(message)


def verify(sandbox, tests: VerifierTests, *programs: str, wall_s: float = 10.0):
    """(ExecutionResult, Verification) for each program, run as one batch."""
    jobs = [Job(p, tests, limits=Limits(wall_s=wall_s), id=f"t{i}") for i, p in enumerate(programs)]
    out = []
    for r in sandbox.run_many(jobs):
        v = verification_of(r)
        assert isinstance(v, Verification), (r.verdict, r.message)
        out.append((r, v))
    return out
