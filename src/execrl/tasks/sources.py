"""Where a benchmark's data comes from, in order: the package that ships it, a local data
directory (`--data-dir`, else `$EXECRL_DATA_DIR`, laid out as `<dir>/<dataset>/<file>`), the
download cache, then a download through the `datasets` library where a public copy exists.
"""

from __future__ import annotations

import gzip
import importlib.resources
import json
import os
import socket
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from execrl.tasks.errors import DataNotFound, TaskDataError
from execrl.tasks.jsonl import read_json_lines
from execrl.tasks.schema import Task

DATA_DIR_ENV = "EXECRL_DATA_DIR"
CACHE_DIR_ENV = "EXECRL_CACHE_DIR"


@dataclass(frozen=True, slots=True)
class HubCopy:
    """A public copy on the Hugging Face hub whose records have the file's fields."""

    path: str  # e.g. "google-research-datasets/mbpp"
    name: str | None = None  # the dataset config
    splits: tuple[str, ...] = ("test",)  # concatenated in this order
    sort_key: str | None = None  # field to order records by, as the file does


@dataclass(frozen=True, slots=True)
class DataFile:
    dataset: str  # folder under the data directory, e.g. "mbpp"
    filename: str  # e.g. "mbpp.jsonl"
    package: tuple[str, str] | None = None  # (import name, resource path) of a shipping package
    hub: HubCopy | None = None


@dataclass(frozen=True, slots=True)
class Found:
    path: Path
    origin: str  # "package <name>", "data dir", "download cache"


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_DIR_ENV) or Path.home() / ".cache" / "execrl")


def data_dir_of(data_dir: str | Path | None) -> Path | None:
    d = data_dir if data_dir is not None else os.environ.get(DATA_DIR_ENV)
    return Path(d) if d else None


def wanted_path(spec: DataFile, root: Path | None) -> str:
    """Where the data directory should hold `spec`'s file ("<data dir>/..." when none is set)."""
    return (
        str(root / spec.dataset / spec.filename)
        if root
        else f"<data dir>/{spec.dataset}/{spec.filename}"
    )


def locate(spec: DataFile, data_dir: str | Path | None = None, download: bool = True) -> Found:
    """The first place that has the file; DataNotFound, saying what to put where, if none."""
    tried: list[str] = []
    if spec.package:
        module, resource = spec.package
        try:
            path = Path(str(importlib.resources.files(module).joinpath(resource)))
        except ModuleNotFoundError:
            tried.append(f"the {module!r} package (not installed)")
        else:
            if path.is_file():
                return Found(path, f"package {module}")
            tried.append(f"the {module!r} package ({path} missing)")
    root = data_dir_of(data_dir)
    if root is not None:
        path = root / spec.dataset / spec.filename
        if path.is_file():
            return Found(path, "data dir")
        tried.append(str(path))
    cached = cache_dir() / "data" / spec.dataset / spec.filename
    if cached.is_file():
        return Found(cached, "download cache")
    tried.append(str(cached))
    why = hub_unreachable() if spec.hub and download else None
    if spec.hub and download and why:
        tried.append(f"a download of {spec.hub.path} (not tried: {why})")
    elif spec.hub and download:
        try:
            return Found(download_hub_copy(spec, cached), f"downloaded {spec.hub.path}")
        except ImportError:
            tried.append(f"a download of {spec.hub.path} (the `datasets` package is not installed)")
        except TaskDataError:
            raise
        except Exception as exc:  # noqa: BLE001 - offline, hub errors: all mean "not found here"
            tried.append(f"a download of {spec.hub.path} ({type(exc).__name__}: {exc})"[:300])
    raise DataNotFound(
        f"{spec.dataset}: no data found. Put {spec.filename} at {wanted_path(spec, root)} "
        f"(choose the directory with --data-dir DIR or {DATA_DIR_ENV}=DIR). Looked in: "
        + "; ".join(tried)
    )


_PROXIES = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")


def hub_unreachable(timeout_s: float = 2.0) -> str | None:
    """Why a download cannot be tried (offline by setting, or the hub's endpoint does not take
    a connection within `timeout_s`), or None. `datasets` finds out by retrying for half a
    minute; one connection says as much. Behind a proxy the proxy decides: not checked."""
    for name in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE"):
        if os.environ.get(name, "") not in ("", "0"):
            return f"{name} is set"
    if any(os.environ.get(p) for p in _PROXIES):
        return None
    url = urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host, port = url.hostname or "", url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError as e:
        return f"{host}:{port} cannot be reached: {e.strerror or e}"
    return None


def download_hub_copy(
    spec: DataFile, dest: Path, load_dataset: Callable[..., Any] | None = None
) -> Path:
    """Download the public copy with `datasets`, and cache it in the file's own format."""
    assert spec.hub is not None
    if load_dataset is None:
        from datasets import load_dataset  # optional: only online users need it
    hub = spec.hub
    records: list[dict[str, Any]] = []
    for split in hub.splits:
        records.extend(dict(r) for r in load_dataset(hub.path, hub.name, split=split))
    if not records:
        raise TaskDataError(f"{hub.path} ({hub.name}): the download holds no records")
    if hub.sort_key:
        records.sort(key=lambda r: r[hub.sort_key])
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        if spec.filename.endswith(".json"):
            json.dump(records, f)
        else:
            f.writelines(json.dumps(r) + "\n" for r in records)
    tmp.replace(dest)
    return dest


def read_records(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """(where, record) for a .jsonl, .jsonl.gz or JSON-array file, `where` naming the file and
    line (or array index) for error messages."""
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rt", encoding="utf-8") as f:
                text = f.read()
        else:
            text = path.read_text(encoding="utf-8")
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as exc:
        raise TaskDataError(
            f"{path}: cannot read the file (corrupt or truncated?): {exc}"
        ) from None
    if path.name.endswith(".json"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TaskDataError(f"{path}: not valid JSON (truncated?): {exc}") from None
        if not isinstance(data, list):
            raise TaskDataError(f"{path}: expected a JSON array of records")
        rows = [(f"{path} record {i}", r) for i, r in enumerate(data)]
    else:
        rows = [(f"{path}:{i}", r) for i, r in read_json_lines(path, text)]
    for where, rec in rows:
        if not isinstance(rec, dict):
            raise TaskDataError(f"{where}: expected a JSON object, got {type(rec).__name__}")
    if not rows:
        raise TaskDataError(f"{path}: the file holds no records")
    return rows


def field(where: str, rec: dict[str, Any], name: str, kind: type | tuple[type, ...] = str) -> Any:
    """A required field of a record, of the given type, or a TaskDataError naming it."""
    if name not in rec:
        raise TaskDataError(f"{where}: record has no field {name!r}")
    value = rec[name]
    if not isinstance(value, kind):
        raise TaskDataError(f"{where}: field {name!r} has the wrong type ({type(value).__name__})")
    return value


def make_task(where: str, **kwargs: Any) -> Task:
    """A Task, with the schema's own checks (no tests, ...) reported against the record."""
    try:
        return Task(**kwargs)
    except ValueError as exc:
        raise TaskDataError(f"{where}: {exc}") from None
