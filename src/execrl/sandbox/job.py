"""A job: one program and the tests to grade it with, as the pool receives it."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from execrl.sandbox import plain
from execrl.sandbox.limits import Limits
from execrl.tasks.schema import AssertTests, CallTests, StdioTests, Tests


@dataclass(frozen=True, slots=True)
class Job:
    program: str  # the whole program the candidate's code becomes
    tests: Tests
    entry_point: str | None = None
    limits: Limits = field(default_factory=Limits)
    strict_returns: bool = True  # entry-point returns must be plain data (assert tests)
    # Let the program start threads and processes (up to Limits.processes). Off by default: a
    # thread could act while the harness reports, and Python 3.11 cannot audit thread starts.
    allow_threads: bool = False
    id: str = ""

    def __post_init__(self) -> None:
        if len(self.tests) == 0:
            raise ValueError(
                f"job {self.id or '<unnamed>'}: the tests are empty; a task must have tests"
            )
        if isinstance(self.tests, CallTests):
            if not self.entry_point:
                raise ValueError(f"job {self.id or '<unnamed>'}: call tests need an entry point")
            if len(self.tests.expected) != len(self.tests.inputs):
                raise ValueError(
                    f"job {self.id or '<unnamed>'}: {len(self.tests.inputs)} inputs but {len(self.tests.expected)} expected values"
                )

    def units(self) -> list[dict[str, Any]]:
        """What the worker receives. Expected values of call and stdio tests stay here."""
        base = {
            "program": self.program,
            "entry_point": self.entry_point,
            "allow_threads": self.allow_threads,
        }
        t = self.tests
        if isinstance(t, AssertTests):
            imports = imported_modules(t.setup + "\n" + "\n".join(t.statements))
            return [
                dict(
                    base,
                    kind="assert",
                    setup=t.setup,
                    statements=list(t.statements),
                    strict_returns=self.strict_returns,
                    imports=imports,
                )
            ]
        if isinstance(t, CallTests):
            return [
                dict(base, kind="call", inputs=[plain.encode(tuple(args)) for args in t.inputs])
            ]
        if isinstance(t, StdioTests):
            return [dict(base, kind="stdio", stdin=case.stdin) for case in t.cases]
        raise TypeError(f"unknown tests type {type(t).__name__}")


def imported_modules(source: str) -> list[str]:
    """Modules the test code imports: the harness snapshots them before the candidate runs."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return sorted(names)
