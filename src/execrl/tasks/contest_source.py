"""What the contest-data loaders share: the `NAME:PATH?opt=value` spec, reading upstream files
(JSONL, JSONL.gz, a JSON array, or parquet), the online route through `datasets`, and the
per-problem limits scaled from the judge's.

A spec names a local file of upstream records, `livecodebench:/data/test6.jsonl`, with options
after a `?`: `livecodebench:/data/test6.jsonl?since=2024-08-01&until=2025-02-01`. Online users
write `hf` (the dataset's usual hub copy) or `hf:OWNER/NAME@SPLIT` in place of the path; the
records come through `datasets.load_dataset` with the same fields as the files.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from execrl.tasks.errors import DataNotFound, TaskDataError
from execrl.tasks.limit_caps import CAPS, MAX_MEMORY_MB, MAX_TEST_S, LimitCaps, capped
from execrl.tasks.schema import Task, TimeLimit
from execrl.tasks.sources import read_records

Record = tuple[str, dict[str, Any]]  # (where: file and line, for messages; the record)

# Limits from the data are the judge's, set for C++ on a fast, idle machine; a Python program
# here runs on a shared, loaded host. Each limit is multiplied by its factor (docs/benchmarks.md: "Contest
# data"). The memory floor covers CPython's own allocations, which the judge's limit never saw.
TIME_FACTOR = 2.0
MEMORY_FACTOR = 1.0
MEMORY_FLOOR_MB = 256
# The scaled limits are capped (`limit_caps`: a record's limits are data; one asked for 48 hours
# and 976 GiB a test). `?max_test_s=` and `?max_memory_mb=` on the benchmark's name raise or
# lower the caps, where the loader reads limits from its records (`LIMIT_OPTIONS`).
LIMIT_OPTIONS = ("max_test_s", "max_memory_mb")
# A judge's limit as its records write it, "2 seconds", "256 megabytes": the token before the
# unit, which must be an ASCII decimal number.
SECONDS = re.compile(r"(\S+?)\s*sec", re.I | re.A)
MEGABYTES = re.compile(r"(\S+?)\s*(?:megabytes|mb)", re.I | re.A)
_DECIMAL = re.compile(r"(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.A)


@dataclass(frozen=True, slots=True)
class HubSource:
    """Where the dataset lives on the Hugging Face hub, for `NAME:hf`."""

    path: str  # e.g. "deepmind/code_contests", or "json" with data_files
    split: str
    data_files: str | None = None  # for hub repos that ship plain JSONL behind a loading script


@dataclass(frozen=True, slots=True)
class Spec:
    source: str  # the local path, or "hf..." for the hub
    options: dict[str, str]


def parse_spec(name: str, rest: str, known: Sequence[str]) -> Spec:
    """`PATH?k=v&k=v` into its parts; an option not in `known` is an error naming the known ones."""
    source, sep, query = rest.partition("?")
    if not source:
        raise TaskDataError(f"{name}: give the data as {name}:PATH (a file of upstream records)")
    options: dict[str, str] = {}
    if sep:
        try:
            pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=True)
        except ValueError:
            raise TaskDataError(f"{name}:{rest}: options after '?' must be key=value&...") from None
        for key, value in pairs:
            if key not in known:
                raise TaskDataError(
                    f"{name}:{rest}: unknown option {key!r}; known: {', '.join(known) or 'none'}"
                )
            options[key] = value
    return Spec(source, options)


def load_records(
    name: str,
    spec: Spec,
    hub: HubSource,
    load_dataset: Callable[..., Any] | None = None,
) -> list[Record]:
    """The upstream records named by the spec: a local file, or the hub copy for `hf[:...]`."""
    if spec.source == "hf" or spec.source.startswith("hf:"):
        return hub_records(name, spec.source, hub, load_dataset)
    path = Path(spec.source)
    if not path.is_file():
        raise DataNotFound(f"{name}: no such file {path} (give {name}:PATH to a file of records)")
    if path.suffix == ".parquet":
        return parquet_records(path)
    return read_records(path)


def parquet_records(path: Path) -> list[Record]:
    try:
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - pyarrow comes with `datasets`
        raise TaskDataError(
            f"{path}: reading parquet needs pyarrow (pip install pyarrow)"
        ) from None
    try:
        rows = pq.read_table(path).to_pylist()
    except Exception as exc:  # noqa: BLE001 - any arrow error means an unreadable file
        raise TaskDataError(f"{path}: not a readable parquet file: {exc}") from None
    if not rows:
        raise TaskDataError(f"{path}: the file holds no records")
    return [(f"{path} row {i}", r) for i, r in enumerate(rows)]


def hub_records(
    name: str, source: str, hub: HubSource, load_dataset: Callable[..., Any] | None = None
) -> list[Record]:
    """Records through `datasets` (online users). `hf` is the usual copy; `hf:OWNER/NAME@SPLIT`
    another with the same fields."""
    if source != "hf":
        repo, _, split = source[len("hf:") :].partition("@")
        hub = HubSource(repo, split or hub.split)
    if load_dataset is None:
        try:
            from datasets import load_dataset
        except ImportError:
            raise DataNotFound(
                f"{name}:{source} needs the `datasets` package; or give {name}:PATH to a local file"
            ) from None
    kwargs: dict[str, Any] = {"split": hub.split}
    if hub.data_files:
        kwargs["data_files"] = hub.data_files
    rows = [dict(r) for r in load_dataset(hub.path, **kwargs)]
    if not rows:
        raise TaskDataError(f"{name}: {hub.path} ({hub.split}) holds no records")
    return [(f"{hub.path}[{hub.split}] row {i}", r) for i, r in enumerate(rows)]


def json_value(where: str, rec: dict[str, Any], name: str, default: Any = ...) -> Any:
    """A field the upstream files keep as a JSON string (APPS' `input_output`) or, once read
    through `datasets`/parquet, may hold already decoded."""
    if name not in rec or rec[name] is None or rec[name] == "":
        if default is not ...:
            return default
        raise TaskDataError(f"{where}: record has no field {name!r}")
    value = rec[name]
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise TaskDataError(f"{where}: field {name!r} is not valid JSON: {exc.msg}") from None


def limit_caps(name: str, options: dict[str, str]) -> LimitCaps:
    """The caps of `NAME:PATH?max_test_s=&max_memory_mb=`, the defaults where not given."""
    test_s = _option_number(name, options, "max_test_s", MAX_TEST_S, "seconds")
    memory_mb = _option_number(name, options, "max_memory_mb", MAX_MEMORY_MB, "MiB")
    return replace(CAPS, test_wall_s=test_s, memory_mb=math.ceil(memory_mb))


def _option_number(
    name: str, options: dict[str, str], key: str, default: float, unit: str
) -> float:
    if key not in options:
        return default
    text = options[key]
    value = float(text) if _DECIMAL.fullmatch(text) else math.nan
    if not (math.isfinite(value) and value > 0):
        raise TaskDataError(f"{name}: {key}={text!r}; give a positive number of {unit}")
    return value


def judge_limit(where: str, name: str, text: Any, unit: re.Pattern[str]) -> float | None:
    """The number of a judge's limit written as text ("2 seconds", `unit` SECONDS or MEGABYTES),
    None where the field is empty or names no such unit; a number that is not a positive
    finite ASCII decimal is a TaskDataError naming the record and the field."""
    found = unit.search(str(text)) if text not in (None, "") else None
    if found is None:
        return None
    token = found.group(1)
    value = float(token) if _DECIMAL.fullmatch(token) else math.nan
    if not (math.isfinite(value) and value > 0):
        raise TaskDataError(f"{where}: {name} {str(text)[:80]!r} is not a positive number")
    return value


def scaled_limits(
    per_test_s: float,
    n_tests: int,
    memory_bytes: int | None = None,
    factor: float = TIME_FACTOR,
    caps: LimitCaps = CAPS,
) -> dict[str, TimeLimit]:
    """`Task.time_limits` from a judge's per-test time and memory, scaled by the factors above
    (`factor=1` where the limit is already a Python harness's, as LiveCodeBench's is), then
    capped (`caps`)."""
    per_test = min(per_test_s * factor, caps.test_wall_s)
    memory_mb = None
    if memory_bytes:
        memory_mb = max(MEMORY_FLOOR_MB, math.ceil(memory_bytes / (1 << 20) * MEMORY_FACTOR))
    limits = {"wall_s": per_test * n_tests + 1, "test_wall_s": per_test, "memory_mb": memory_mb}
    return {"tests": TimeLimit(**capped(limits, caps))}


def named(where: str, task_id: object) -> str:
    """`where` with the record's own id, so errors name both the line and the problem."""
    return f"{where} ({task_id})" if task_id not in (None, "") else where


def read_selected(
    name: str,
    records: list[Record],
    option: tuple[str, str | None],
    id_field: str,
    build: Callable[[str, dict[str, Any]], Task],
) -> list[Task]:
    """A task per record whose field `option[0]` equals `option[1]` (every record for None)."""
    key, wanted = option
    tasks = [
        build(named(where, rec.get(id_field)), rec)
        for where, rec in records
        if wanted is None or str(rec.get(key)) == wanted
    ]
    if not tasks:
        raise TaskDataError(f"{name}: no record has {key} {wanted!r}")
    return tasks
