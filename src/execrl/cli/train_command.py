"""`execrl train`: the RL trainer on the command line.

The composition root of a training run, above every layer: it hands the trainer (`rl.run`) the
report layer's telemetry, which the trainer itself may not import. All work is in those two.
Every error a person can fix (the config, the data, a missing package) is a message and exit
status 2, found before any model loads where it can be, and leaves no run directory.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    from execrl.rl.objective.algorithms import names

    p = subparsers.add_parser(
        "train",
        help="train a policy with RL from execution feedback (no arguments: the CPU quickstart)",
        description=f"Train with rl.algorithm = {' | '.join(names())}, or an estimator of your "
        "own (rl.algorithm = 'module:name', docs/algorithms.md). With no arguments, "
        "trains the embedded default model on the procedural suite (the quickstart). "
        "Every config field is documented in execrl/rl/config/config.py; the [reward] section in "
        "docs/rewards.md.",
    )
    p.add_argument("--config", help="TOML file with [model], [data], [sampling], [rl], [optim], "
                   "[sandbox], [run], [reward], [env], [credit] sections")  # fmt: skip
    p.add_argument("--set", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                   help="override one config field, e.g. --set optim.lr=1e-5 or "
                   "--set reward.noise.rate=0.2 (repeatable)")  # fmt: skip
    p.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its last checkpoint "
                   "with its saved config (--set may change run.steps and a few others)")  # fmt: skip
    p.add_argument("--trust-code", action="store_true", help="with --resume: run what the run "
                   "directory's config names (a harness command, module:name classes or "
                   "functions); refused without it, since a run directory may come from anyone")  # fmt: skip
    p.add_argument("--data-dir", metavar="DIR", help="where benchmark data lives "
                   "(<DIR>/<dataset>/<file>; default $EXECRL_DATA_DIR)")  # fmt: skip
    p.add_argument("--allow-weaker-sandbox", action="store_true",
                   help="start the sandbox without the isolation layers this machine lacks "
                   "(e.g. without root); same as --set sandbox.allow_missing_layers=true")  # fmt: skip
    p.set_defaults(handler=_train)


def _train(args: argparse.Namespace) -> int:
    overrides = list(args.set)
    if args.allow_weaker_sandbox:
        overrides.append("sandbox.allow_missing_layers=true")
    # The data directory is read from the environment by the loaders and by the sandbox (which
    # hides it from runs): set for this command only, so that a caller in the same process
    # (a test, a notebook) does not keep it.
    previous = os.environ.get("EXECRL_DATA_DIR")
    if args.data_dir:
        os.environ["EXECRL_DATA_DIR"] = args.data_dir
    try:
        return _train_with(args, overrides)
    finally:
        if previous is None:
            os.environ.pop("EXECRL_DATA_DIR", None)
        else:
            os.environ["EXECRL_DATA_DIR"] = previous


def _train_with(args: argparse.Namespace, overrides: list[str]) -> int:
    from execrl.models.loading.registry import require_fetched
    from execrl.report.trackers import TrackerUnavailable, tracker_names
    from execrl.rl.checkpoint import Unwritable
    from execrl.rl.config.config import ConfigError, load_config, resume_config
    from execrl.rl.episodes.harness import HarnessError
    from execrl.rl.files.safe_load import UnsafeFile
    from execrl.rl.setup import name_taken
    from execrl.tasks.errors import DataNotFound, TaskDataError, UnknownBenchmark

    try:
        if args.resume:
            if args.config:
                raise ConfigError("--resume continues with the run's saved config; drop --config")
            config = resume_config(args.resume, overrides, trust_code=args.trust_code)
        else:
            config = load_config(args.config, overrides)
        tracker_names(config.run.trackers or None)  # a bad tracker is an error before training
        require_fetched(config.model.path)  # a known model not fetched: before anything loads
        taken = name_taken(config)
        if taken:
            raise ConfigError(taken)
    except (ConfigError, ValueError, TrackerUnavailable, FileNotFoundError) as e:
        return _error(e)
    try:
        summary = train_with_telemetry(config)
    except (DataNotFound, TaskDataError, UnknownBenchmark, ImportError, FileNotFoundError) as e:
        return _error(e)  # no data, no model there, no checkpoint, a missing package
    except ConfigError as e:  # what the config asks of the tasks (a curriculum's levels)
        return _error(e)
    except HarnessError as e:  # the agent harness failed on every episode of a batch
        return _error(e)
    except Unwritable as e:  # a full disk; final/ was saved when the last checkpoint failed
        return _error(e)
    except UnsafeFile as e:  # --resume of a checkpoint file that would run code: refused
        return _error(e)
    except KeyboardInterrupt:
        print("execrl train: interrupted twice: the step was abandoned; resume from the last "
              "checkpoint with --resume RUN_DIR, if one was saved", file=sys.stderr)  # fmt: skip
        return 130
    print(json.dumps(summary))
    return 130 if "interrupted_at" in summary else 0


def _error(e: BaseException) -> int:
    print(f"execrl train: error: {e}", file=sys.stderr)
    return 2


def train_with_telemetry(config, **kwargs):  # noqa: ANN001, ANN003, ANN201 - as rl.run.train
    """`rl.run.train` with the report layer watching: trackers, examples, the final report."""
    from execrl.report.telemetry import Telemetry
    from execrl.rl.run import train

    trackers = config.run.trackers or None

    def observer(run_dir, cfg, tasks, first_step, enabled):  # noqa: ANN001, ANN202
        return Telemetry(run_dir, cfg, tasks, first_step, enabled=enabled, trackers=trackers)

    return train(config, observer=observer, **kwargs)
