"""The verdict a job ends with when its run did not end normally: grading that failed on what
the program produced, a worker that died or hung, one that died on every attempt. Shared by the
pool's own loop (`pool.WorkerPool`) and the asynchronous dispatcher (`dispatch`).

Two rules hold here. A program's own doing never ends in SANDBOX_ERROR (training masks it, so a
wrong program able to cause one would escape its penalty): a grading failure is WRONG_ANSWER, a
worker killed on every attempt RUNTIME_ERROR flagged as a possible hack. And one death with no
retry left stays an infrastructure failure (SANDBOX_ERROR), which is masked, not failed.
"""

from __future__ import annotations

import dataclasses

from execrl.sandbox.grading.grade import grade
from execrl.sandbox.grading.job import Job
from execrl.sandbox.grading.verdict import ExecutionResult, SandboxErrorCause, Verdict

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def grade_safely(job: Job, raws: list[dict[str, Any]], attempts: int) -> ExecutionResult:
    """`grade`, which must not raise: an exception here would leave the worker's pipelined
    reply unread, and the next job would get it (a wrong program the verdict of another).

    What grading reads that varies from run to run is what the program produced (its values,
    output, exceptions), so a failure to grade it is the program's verdict, WRONG_ANSWER, not
    SANDBOX_ERROR: training masks that, and a wrong program able to make grading fail would
    escape its penalty."""
    try:
        return grade(job, raws, attempts)
    except Exception as exc:  # noqa: BLE001 - a grading failure fails this run, not the batch
        return ExecutionResult(
            verdict=Verdict.WRONG_ANSWER,
            n_tests=len(job.tests),
            message=f"the program's output could not be graded: {type(exc).__name__}: {exc}",
            attempts=attempts,
        )


def killed_every_worker(job: Job, result: ExecutionResult, deaths: int) -> ExecutionResult:
    """The final result of a job: a run whose worker died on every attempt, a fresh worker
    each time, is the program's doing (a crash of its own worker, or an attempt to buy a masked
    sample), so it is RUNTIME_ERROR flagged as a possible hack, never SANDBOX_ERROR. A single
    death with no retry left stays an infrastructure failure."""
    lost = (SandboxErrorCause.WORKER_DIED, SandboxErrorCause.WORKER_HUNG)
    if result.sandbox_error_cause not in lost or deaths < 2:
        return result
    if deaths < result.attempts:
        return result  # some attempt failed otherwise: not the same run killing every worker
    message = (
        f"the program's sandbox worker died or hung on each of its {deaths} attempts, a fresh "
        "worker each time: the run is failed, not masked"
    )
    return dataclasses.replace(
        result,
        verdict=Verdict.RUNTIME_ERROR,
        message=message,
        sandbox_error_cause="",
        possible_hack=f"killed or hung its sandbox worker on every one of {deaths} attempts",
    )


def infra_error(job: Job, attempts: int, hung: str = "") -> ExecutionResult:
    """The run's worker died, or hung (`hung` says how) and was killed."""
    return ExecutionResult(
        Verdict.SANDBOX_ERROR,
        n_tests=len(job.tests),
        message=f"the sandbox worker {hung}, and was killed"
        if hung
        else ("the sandbox worker died during the run"),
        attempts=attempts,
        sandbox_error_cause=SandboxErrorCause.WORKER_HUNG
        if hung
        else SandboxErrorCause.WORKER_DIED,
    )
