"""`execrl train`: the RL trainer on the command line (thin: all work is in `rl.run`)."""

from __future__ import annotations

import argparse
import json


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
    from execrl.rl.config import ConfigError, load_config
    from execrl.rl.run import train

    overrides = list(args.set) + ([f"run.resume={json.dumps(args.resume)}"] if args.resume else [])
    try:
        config = load_config(args.config, overrides)
    except ConfigError as e:
        print(f"execrl train: {e}")
        return 2
    summary = train(config)
    print(json.dumps(summary))
    return 0
