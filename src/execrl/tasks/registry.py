"""Benchmarks by name: `load_benchmark("humaneval")`, `load_benchmark("jsonl:PATH")`, ...

Each loader takes the data directory (or None) and returns the benchmark's tasks in order.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from execrl.tasks.humaneval import TaskFileError, load_humaneval, read_humaneval_file
from execrl.tasks.schema import Task

Loader = Callable[[Path | None], list[Task]]

LOADERS: dict[str, Loader] = {
    "humaneval": lambda data_dir: load_humaneval(),
}


def data_dir_from_env(data_dir: str | Path | None = None) -> Path | None:
    value = data_dir if data_dir is not None else os.environ.get("EXECRL_DATA_DIR")
    return Path(value) if value else None


def list_benchmarks() -> list[str]:
    return sorted(LOADERS)


def load_benchmark(name: str, data_dir: str | Path | None = None) -> list[Task]:
    if name.startswith("jsonl:"):
        path = Path(name[len("jsonl:") :])
        if not path.exists():
            raise TaskFileError(f"{path}: tasks file not found (from --benchmark {name})")
        return read_humaneval_file(path)
    if name not in LOADERS:
        raise TaskFileError(f"unknown benchmark {name!r}; known: {', '.join(list_benchmarks())}, or jsonl:PATH")
    return LOADERS[name](data_dir_from_env(data_dir))
