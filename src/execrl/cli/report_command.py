"""`execrl report RUN_DIR`: (re)build a run's plots and report.html from its files."""

from __future__ import annotations

import argparse
import json
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "report",
        help="(re)build a training run's report: plots and report.html from its run directory",
        description="Reads metrics.jsonl, examples.jsonl, summary.json and config.toml in RUN_DIR "
        "and writes report/*.png and report.html there. With --tensorboard, also writes the "
        "per-step metrics as TensorBoard events under RUN_DIR/tensorboard.",
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="a directory made by `execrl train`")
    p.add_argument("--tensorboard", action="store_true",
                   help="also (re)write TensorBoard events from metrics.jsonl")  # fmt: skip
    p.set_defaults(handler=_report)


def _report(args: argparse.Namespace) -> int:
    from pathlib import Path

    from execrl.report.build import build_report, read_metrics

    run_dir = Path(args.run_dir)
    try:
        report = build_report(run_dir)
        if args.tensorboard:
            from execrl.report.trackers import TensorBoard

            board_dir = run_dir / "tensorboard"
            for old in board_dir.glob("events.out.tfevents.*"):
                old.unlink()  # rewritten whole: no step twice
            board = TensorBoard(board_dir)
            for row in read_metrics(run_dir / "metrics.jsonl"):
                board.log(row, int(row["step"]))
            board.close()
    except (OSError, ValueError) as e:
        print(f"execrl report: error: {e}", file=sys.stderr)
        return 2
    print(json.dumps({"report": str(report.html), "plots": [str(p) for p in report.plots],
                      "steps": report.steps}))  # fmt: skip
    return 0
