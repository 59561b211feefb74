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


class SandboxErrorCause(enum.StrEnum):
    """Why a run ended in SANDBOX_ERROR: a short stable slug, counted per cause by
    `execrl sandbox bench` and by training telemetry (`sandbox_error/<cause>`). Only
    infrastructure causes belong here: whatever a program does in its own run ends in a
    program verdict, or training would mask (forgive) a wrong program that could cause it. So
    a failure to grade what a program produced is WRONG_ANSWER (`run_outcome.grade_safely`), and a
    worker that dies on every attempt is RUNTIME_ERROR (`run_outcome.killed_every_worker`)."""

    WORKER_DIED = "worker_died"  # the worker process died and no retry was left
    WORKER_HUNG = "worker_hung"  # it gave no answer past the job's limits and was killed
    SETUP_FAILED = "setup_failed"  # the worker could not prepare the run (scratch, limits)
    SHUTDOWN = "shutdown"  # the sandbox closed before the run started
    ACTOR_LOST = "actor_lost"  # Ray: the actor holding the run was lost on every retry
    BACKEND_ERROR = "backend_error"  # Ray: any other failure of the remote call
    CHECKER_FAILED = "checker_failed"  # a problem's checker program failed on the answer too
    TASK_DATA = "task_data"  # a verifier found the task's own data wrong (its spec): fix the task


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
    # A `SandboxErrorCause` slug when verdict is SANDBOX_ERROR, else "".
    sandbox_error_cause: str = ""
    # Why the run looks like an attempt to escape its penalty ("" when it does not), e.g. a job
    # that killed a fresh worker on every attempt. Such runs get a program verdict, never a mask.
    possible_hack: str = ""
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
