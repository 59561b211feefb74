"""`execrl train`: the RL trainer on the command line.

The composition root of a training run, above every layer: it hands the trainer (`rl.run`) the
report layer's telemetry, which the trainer itself may not import. All work is in those two.
"""

from __future__ import annotations

import argparse
import json
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "train",
        help="train a policy with RL from execution feedback (no arguments: the CPU quickstart)",
        description="Train with GRPO / Dr. GRPO / RLOO / REINFORCE++ / PPO. With no arguments, "
        "trains the embedded default model on the procedural suite (the quickstart). "
        "Every config field is documented in execrl/rl/config.py.",
    )
    p.add_argument("--config", help="TOML file with [model], [data], [sampling], [rl], [optim], "
                   "[sandbox], [run] sections")  # fmt: skip
    p.add_argument("--set", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                   help="override one config field, e.g. --set optim.lr=1e-5 (repeatable)")  # fmt: skip
    p.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its last checkpoint")
    p.set_defaults(handler=_train)


def _train(args: argparse.Namespace) -> int:
    from execrl.report.trackers import TrackerUnavailable, tracker_names
    from execrl.rl.config import ConfigError, load_config

    overrides = list(args.set) + ([f"run.resume={json.dumps(args.resume)}"] if args.resume else [])
    try:
        config = load_config(args.config, overrides)
        tracker_names(config.run.trackers or None)  # a bad tracker is an error before training
    except (ConfigError, ValueError, TrackerUnavailable) as e:
        print(f"execrl train: error: {e}", file=sys.stderr)
        return 2
    summary = train_with_telemetry(config)
    print(json.dumps(summary))
    return 0


def train_with_telemetry(config, **kwargs):  # noqa: ANN001, ANN003, ANN201 - as rl.run.train
    """`rl.run.train` with the report layer watching: trackers, examples, the final report."""
    from execrl.report.telemetry import Telemetry
    from execrl.rl.run import train

    trackers = config.run.trackers or None

    def observer(run_dir, cfg, tasks, first_step, enabled):  # noqa: ANN001, ANN202
        return Telemetry(run_dir, cfg, tasks, first_step, enabled=enabled, trackers=trackers)

    return train(config, observer=observer, **kwargs)
