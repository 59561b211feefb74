"""Command-line entry point (thin: parses arguments and calls into the package)."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from execrl.commands import run

    return run(sys.argv[1:] if argv is None else argv)
