"""`execrl tasks validate`: every reference solution against its own tests, in the sandbox.

Beyond the references passing, for tasks graded by a verifier (docs/verifiers.md): each
reference scores the maximum (1.0), and each task's wrong solution (`VerifierTests.wrong`)
scores below it (`verifier_failures`). A verifier that gave the wrong solution full
marks could not tell a right program from a wrong one on that task."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from execrl.sandbox import Job, Limits, Sandbox, reference_limits, verification_of
from execrl.tasks.schema import Task, VerifierTests, job_limits


@dataclass(frozen=True, slots=True)
class Failure:
    task_id: str
    verdict: str
    message: str


def validate(tasks: Sequence[Task], workers: int = 2, progress: bool = True) -> list[Failure]:
    """Run each task's reference; the failures, with their verdicts. Tasks without a
    reference are not run (the caller says how many)."""
    runnable = [t for t in tasks if t.reference is not None]
    jobs = [Job.for_task(t, t.reference or "", reference_limits(t)) for t in runnable]
    failures: list[Failure] = []
    from tqdm import tqdm

    bar = tqdm(
        total=len(jobs),
        desc="validate",
        file=sys.stderr,
        disable=not (progress and sys.stderr.isatty()),
    )
    with Sandbox(workers=workers) as sb:
        for start in range(0, len(jobs), 32):
            chunk = jobs[start : start + 32]
            for task, r in zip(runnable[start : start + 32], sb.run_many(chunk), strict=True):
                if not r.passed:
                    failures.append(Failure(task.id, r.verdict.value, r.message))
            bar.update(len(chunk))
        # Verifier tasks: references score the maximum, wrong solutions less (docs/verifiers.md).
        failures.extend(verifier_failures(runnable, sb))
    bar.close()
    return failures


def verifier_failures(tasks: Sequence[Task], sandbox: Any) -> list[Failure]:
    """Failures of the two checks above, run in `sandbox`; other tasks are not looked at."""
    checked = [t for t in tasks if isinstance(t.tests, VerifierTests) and t.reference]
    jobs: list[Job] = []
    for t in checked:
        assert isinstance(t.tests, VerifierTests)
        limits = Limits(**{"memory_mb": 4096, **job_limits(t)})
        jobs.append(Job(t.reference or "", t.tests, limits=limits, id=t.id))
        if t.tests.wrong:
            jobs.append(Job(t.tests.wrong, t.tests, limits=limits, id=t.id))
    results = iter(sandbox.run_many(jobs) if jobs else [])
    failures: list[Failure] = []
    for t in checked:
        assert isinstance(t.tests, VerifierTests)
        ref = next(results)
        ref_score = _score(ref)
        if ref.passed and ref_score < 1.0:
            failures.append(
                Failure(t.id, ref.verdict.value, f"the reference scores {ref_score:g}, not 1.0")
            )
        if not t.tests.wrong:
            failures.append(Failure(t.id, "NO_WRONG", "the task has no wrong solution to check"))
            continue
        wrong = next(results)
        if wrong.passed or _score(wrong) >= ref_score:
            failures.append(
                Failure(
                    t.id,
                    wrong.verdict.value,
                    f"the wrong solution scores {_score(wrong):g}, not below the reference's "
                    f"{ref_score:g}",
                )
            )
    return failures


def _score(result: Any) -> float:
    found = verification_of(result)
    return found.score if found is not None else float(result.passed)
