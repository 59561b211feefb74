"""Command-line entry point. Thin: each area registers its own subcommands."""

from __future__ import annotations

import argparse
import importlib
import sys

# Each module defines `register(subparsers)`; its handlers receive the parsed args and return an
# exit code. Add a module here when a new area grows commands.
COMMAND_MODULES = (
    "execrl.eval.commands",
    "execrl.eval.eval_command",
    "execrl.sandbox.service.commands",
    "execrl.train_command",
    "execrl.sft_command",
    "execrl.report.commands",
    "execrl.eval.tasks_command",
    "execrl.serve_policy_command",
    "execrl.models_command",
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
    from execrl.sandbox.grading.languages import LanguageUnavailable

    try:
        return int(args.handler(args) or 0)
    except LanguageUnavailable as e:  # a toolchain missing here: any command that runs programs
        print(f"execrl {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
