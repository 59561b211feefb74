"""The one verdict enum of the project, and the records a sandbox run returns."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Verdict(enum.StrEnum):
    PASSED = "PASSED"
    WRONG_ANSWER = "WRONG_ANSWER"
    RUNTIME_ERROR = "RUNTIME_ERROR"
    TIMEOUT = "TIMEOUT"
    MEMORY_LIMIT = "MEMORY_LIMIT"
    OUTPUT_LIMIT = "OUTPUT_LIMIT"
    SYNTAX_ERROR = "SYNTAX_ERROR"
    # The infrastructure failed (worker died, protocol broke). Never the program's fault:
    # retried by the pool, and masked out of rewards if it persists.
    SANDBOX_ERROR = "SANDBOX_ERROR"


@dataclass(frozen=True, slots=True)
class TestOutcome:
    """What happened in one test of a run."""

    index: int
    verdict: Verdict
    exception: str | None = None  # exception type name, e.g. "AssertionError"
    message: str = ""  # exception message or comparison detail, truncated
    line: int | None = None  # line of the candidate's code that raised, 1-based
    wall_s: float | None = None


@dataclass(frozen=True, slots=True)
class ExecutionResult:
    """The trusted outcome of running one program against its tests."""

    verdict: Verdict
    tests: tuple[TestOutcome, ...] = ()
    n_tests: int = 0  # tests the job asked for; len(tests) may be smaller after a timeout
    message: str = ""  # run-level detail: the reason for a non-test failure
    line: int | None = None  # candidate line of a run-level failure (syntax error, crash on load)
    cpu_s: float = 0.0
    wall_s: float = 0.0
    peak_memory_kb: int = 0
    stdout: str = ""  # captured, capped; for stdio tests the program's output of the last case
    stderr: str = ""
    attempts: int = 1  # > 1 when a SANDBOX_ERROR was retried
    tampering: tuple[str, ...] = ()  # harness-tampering attempts the sandbox saw (audit denials)
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.verdict is Verdict.PASSED

    @property
    def n_passed(self) -> int:
        return sum(1 for t in self.tests if t.verdict is Verdict.PASSED)

    @property
    def pass_rate(self) -> float:
        return self.n_passed / self.n_tests if self.n_tests else 0.0
