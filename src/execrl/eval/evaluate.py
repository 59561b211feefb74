"""Evaluate samples against a benchmark in the sandbox: verdicts per sample, pass@k per run."""

from __future__ import annotations

import json
import os
import tempfile
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from execrl.eval.passk import mean_pass_at_k
from execrl.eval.samples import Sample, program_for
from execrl.sandbox import ExecutionResult, Job, Limits, Sandbox, Verdict
from execrl.tasks.errors import TaskDataError
from execrl.tasks.schema import Task


@dataclass(frozen=True, slots=True)
class SampleResult:
    sample: Sample
    completion_id: int  # index of this sample among its task's samples
    result: ExecutionResult


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
    limits: Limits,
    progress: Callable[[int], None] | None = None,
) -> list[SampleResult]:
    by_id = {t.id: t for t in tasks}
    jobs, ids = [], Counter[str]()
    completion_ids = []
    for s in samples:
        task = by_id[s.task_id]
        try:
            job = Job(
                program=program_for(s, task, fmt),
                tests=task.tests,
                entry_point=task.entry_point,
                limits=limits,
                id=s.task_id,
            )
        except ValueError as exc:  # empty tests, call tests without an entry point: never a pass
            raise TaskDataError(
                f"task {task.id} (from {task.metadata.get('source', 'the benchmark')}): {exc}"
            ) from None
        jobs.append(job)
        completion_ids.append(ids[s.task_id])
        ids[s.task_id] += 1
    results = sandbox.run_many(jobs, progress=progress)
    return [
        SampleResult(s, cid, r) for s, cid, r in zip(samples, completion_ids, results, strict=True)
    ]


def summarize(benchmark: str, results: Sequence[SampleResult], unknown: int = 0) -> dict[str, Any]:
    per_task: dict[str, list[bool]] = defaultdict(list)
    for r in results:
        per_task[r.sample.task_id].append(r.result.passed)
    counts = [(len(v), sum(v)) for v in per_task.values()]
    n_min = min(n for n, _ in counts)
    summary: dict[str, Any] = {
        "benchmark": benchmark,
        "n_tasks": len(per_task),
        "n_samples": len(results),
        "samples_per_task": n_min
        if all(n == n_min for n, _ in counts)
        else [n_min, max(n for n, _ in counts)],
    }
    for k in range(1, n_min + 1):
        summary[f"pass@{k}"] = mean_pass_at_k(counts, k)
    verdicts = Counter(r.result.verdict.value for r in results)
    summary["verdicts"] = {v.value: verdicts.get(v.value, 0) for v in Verdict}
    summary["sandbox_errors"] = verdicts.get(Verdict.SANDBOX_ERROR.value, 0)
    summary["tampering"] = sum(1 for r in results if r.result.tampering)
    if unknown:
        summary["ignored_unknown"] = unknown
    return summary


def result_record(r: SampleResult) -> dict[str, Any]:
    res = r.result
    return {
        **r.sample.record,
        "task_id": r.sample.task_id,
        "completion_id": r.completion_id,
        "passed": res.passed,
        "verdict": res.verdict.value,
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
