"""Command-line entry point (`execrl`, `python -m execrl.cli`). Thin: each command module in
this package registers its own subcommands."""

from __future__ import annotations

import argparse
import importlib
import sys

# Each module defines `register(subparsers)`; its handlers receive the parsed args and return an
# exit code. Add a module here when a new area grows commands.
COMMAND_MODULES = (
    "execrl.cli.eval_samples_command",
    "execrl.cli.eval_command",
    "execrl.cli.sandbox_command",
    "execrl.cli.train_command",
    "execrl.cli.sft_command",
    "execrl.cli.report_command",
    "execrl.cli.tasks_command",
    "execrl.cli.serve_policy_command",
    "execrl.cli.models_command",
    "execrl.cli.plan_command",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="execrl", description="Reinforcement learning from execution feedback for code models."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    from execrl.sandbox import LanguageUnavailable

    try:
        return int(args.handler(args) or 0)
    except LanguageUnavailable as e:  # a toolchain missing here: any command that runs programs
        print(f"execrl {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: a line, not the traceback of wherever it landed
        print(f"execrl {args.command}: interrupted{AFTER_INTERRUPT.get(args.command, '')}",
              file=sys.stderr)  # fmt: skip
        return 130


# What a command interrupted keeps, said with its Ctrl-C (`execrl train` says its own).
AFTER_INTERRUPT = {
    "eval": "; the samples generated so far are saved: the same command continues from them",
}
