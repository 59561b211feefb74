"""`execrl sft`: supervised fine-tuning, the warm-up stage before RL, on the command line.

The run is `rl.sft.run`; this module reads the flags, builds its config (`rl.sft.config`) and
hands it the report layer's trackers. Errors a person can fix (config, data) are messages and
exit status 2, found before the model loads where they can be.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import sys
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "sft",
        help="supervised fine-tuning on prompt/completion pairs or chat messages",
        description="Fine-tune a model on JSONL examples, loss on the completion tokens only; "
        "its final/ directory is a model.path for `execrl train`. Fields: execrl/rl/sft/config.py.",
    )
    p.add_argument("--config", help="TOML file with [model], [data], [optim], [run] sections")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                   help="override one config field, e.g. --set data.train=pairs.jsonl")  # fmt: skip
    p.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its checkpoint "
                   "(--set may change run.steps, run.checkpoint_every, run.trackers, model.threads)")  # fmt: skip
    p.set_defaults(handler=_sft)


def _sft(args: argparse.Namespace) -> int:
    # imported here: torch and the models are not for --help
    from execrl.models.loading.registry import require_fetched
    from execrl.report.trackers import TrackerUnavailable, open_trackers, tracker_names
    from execrl.rl.checkpoint import Unwritable
    from execrl.rl.config.config import ConfigError
    from execrl.rl.sft.config import sft_config_for
    from execrl.rl.sft.run import run_sft
    from execrl.tasks.errors import TaskDataError

    resume = Path(args.resume) if args.resume else None
    try:
        config = sft_config_for(args.config, args.set, resume)
        names = tracker_names(config.run.trackers)
        require_fetched(config.model.path)  # a known model not fetched: before anything loads
        summary = run_sft(config, resume, functools.partial(open_trackers, names))
    except (
        ConfigError,
        TaskDataError,
        TrackerUnavailable,
        ValueError,
        ImportError,
        FileNotFoundError,
        Unwritable,
    ) as e:  # FileNotFoundError: no model there (or offline); Unwritable: a full disk
        print(f"execrl sft: error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(dataclasses.asdict(summary)))
    return 0
