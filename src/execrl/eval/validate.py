"""`execrl tasks validate`: every reference solution against its own tests, in the sandbox."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

from execrl.sandbox import Job, Sandbox
from execrl.sandbox.grading.job import reference_limits
from execrl.tasks.schema import Task


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
        from execrl.eval.verifier_validate import verifier_failures  # it imports Failure

        failures.extend(verifier_failures(runnable, sb))
    bar.close()
    return failures
