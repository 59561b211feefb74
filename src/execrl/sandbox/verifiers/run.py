"""Running jobs graded by verifiers: each expands into the runs its verifier asks for, all runs
of a batch go to the pool together, and each verifier scores its own runs in the parent.

The result is an ordinary `ExecutionResult` of one test (the verifier's verdict), so `pass`,
`pass@k` and every reward that reads verdicts work on verifier tasks unchanged; the
`Verification` itself (score, components, feedback, artifacts) rides in `extra` and is read
with `verification_of`.

A task file that names an unknown verifier, or whose spec its verifier cannot read
(`VerifierSpecError` from `jobs`), is the user's error before anything runs: it is raised,
naming the task and the field (the CLI's one-line error). Once runs have come back, a verifier
that finds the task's data wrong (a reference that fails, a best known value a solution beats)
fails that job alone, never the batch: SANDBOX_ERROR with cause `task_data` and the error,
naming the task, as its message. No program can cause one (a program's output that breaks the
check is its WRONG_ANSWER), so the mask forgives nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from execrl.sandbox.grading.job import Job
from execrl.sandbox.grading.verdict import ExecutionResult, SandboxErrorCause, TestOutcome, Verdict
from execrl.sandbox.verifiers import load_verifier
from execrl.sandbox.verifiers.base import Verification, Verifier, VerifierSpecError, VerifyRequest
from execrl.tasks.schema import VerifierTests

FEEDBACK_CHARS = 2000  # feedback kept in the result's message


def run_verified(
    run: Callable[[Sequence[Job]], list[ExecutionResult]],
    jobs: Sequence[Job],
    progress: Callable[[int], None] | None = None,
) -> list[ExecutionResult]:
    """The results of `jobs` (tests `VerifierTests`), in order; `run` runs plain jobs (the pool
    below), all the verifiers' runs together."""
    expanded: list[Job] = []
    plans: list[tuple[int, Verifier, VerifyRequest, int, int]] = []
    results: list[ExecutionResult | None] = [None] * len(jobs)
    for i, job in enumerate(jobs):
        assert isinstance(job.tests, VerifierTests)
        request = VerifyRequest(job.id, job.program, job.tests, job.limits)
        try:
            verifier = load_verifier(job.tests.verifier)
        except VerifierSpecError as exc:
            raise VerifierSpecError(f"task {job.id or '<unnamed>'}: {exc}") from None
        try:
            runs = list(verifier.jobs(request))
        except VerifierSpecError:
            raise  # the task file is wrong before anything ran: the user's error to fix
        except Exception as exc:  # noqa: BLE001 - the program may have broken it: see below
            results[i] = unverifiable(request, exc)
            continue
        plans.append((i, verifier, request, len(expanded), len(expanded) + len(runs)))
        expanded.extend(runs)
    ran = run(expanded) if expanded else []
    for i, verifier, request, start, end in plans:
        results[i] = verified_result(verifier, request, ran[start:end])
    if progress is not None:
        progress(len(jobs))
    return [r for r in results if r is not None]


def verified_result(
    verifier: Verifier, request: VerifyRequest, runs: Sequence[ExecutionResult]
) -> ExecutionResult:
    """The verifier's judgement as a result of one test. An infrastructure failure of any run
    is SANDBOX_ERROR (masked, as for unit tests); a verifier that cannot read what a program
    produced fails the program (WRONG_ANSWER), as `run_outcome.grade_safely` does for unit tests, so
    no program escapes its penalty by breaking the grader."""
    infra = next((r for r in runs if r.verdict is Verdict.SANDBOX_ERROR), None)
    if infra is not None:
        outcome = TestOutcome(0, Verdict.SANDBOX_ERROR, message=infra.message)
        return replace(infra, tests=(outcome,), n_tests=1)
    try:
        verification = verifier.verify(request, runs)
    except VerifierSpecError as exc:
        return task_data_error(request, exc)
    except Exception as exc:  # noqa: BLE001 - the program's output broke the check
        return unverifiable(request, exc, runs)
    return _as_result(verification, runs)


def _as_result(verification: Verification, runs: Sequence[ExecutionResult]) -> ExecutionResult:
    feedback = verification.feedback[:FEEDBACK_CHARS]
    last = runs[-1] if runs else ExecutionResult(Verdict.PASSED)
    return ExecutionResult(
        verdict=verification.verdict,
        tests=(TestOutcome(0, verification.verdict, message=feedback),),
        n_tests=1,
        message="" if verification.verdict is Verdict.PASSED else feedback,
        cpu_s=sum(r.cpu_s for r in runs),
        wall_s=sum(r.wall_s for r in runs),
        peak_memory_kb=max((r.peak_memory_kb for r in runs), default=0),
        stdout=last.stdout,
        stderr=last.stderr,
        attempts=max((r.attempts for r in runs), default=1),
        tampering=tuple(dict.fromkeys(t for r in runs for t in r.tampering)),
        possible_hack=next((r.possible_hack for r in runs if r.possible_hack), ""),
        extra={"verification": verification},
    )


def unverifiable(
    request: VerifyRequest, exc: Exception, runs: Sequence[ExecutionResult] = ()
) -> ExecutionResult:
    """A check that raised on what the program gave it fails the program, never the batch."""
    message = f"the program could not be verified: {type(exc).__name__}: {exc}"
    return _as_result(Verification(0.0, {}, Verdict.WRONG_ANSWER, message), runs)


def task_data_error(request: VerifyRequest, exc: VerifierSpecError) -> ExecutionResult:
    """The result of a job whose task's verifier data is wrong: masked, with the error."""
    message = str(exc)
    task = f"task {request.task_id or '<unnamed>'}"
    if not message.startswith(task):
        message = f"{task}: {message}"
    return ExecutionResult(
        Verdict.SANDBOX_ERROR,
        tests=(TestOutcome(0, Verdict.SANDBOX_ERROR, message=message),),
        n_tests=1,
        message=message,
        sandbox_error_cause=SandboxErrorCause.TASK_DATA,
    )
