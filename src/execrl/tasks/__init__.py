"""Tasks: one schema for every benchmark, loaders, and the procedural suite.

Every name is imported on first use: the sandbox worker imports `execrl.tasks.values` (the
tagged JSON of its plain data), and must not pay for the rest.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing stays out of the sandbox's worker
if TYPE_CHECKING:
    from typing import Any

_SCHEMA = ("AssertTests", "CallTests", "Compare", "StdioCase", "StdioTests", "Task", "Tests",
           "TimeLimit", "VerifierTests")  # fmt: skip
_LAZY = {
    "load_benchmark": "execrl.tasks.catalog.registry",
    "list_benchmarks": "execrl.tasks.catalog.registry",
    "read_tasks": "execrl.tasks.jsonl",
    "write_tasks": "execrl.tasks.jsonl",
    "generate_synthetic": "execrl.tasks.synthetic",
    **dict.fromkeys(_SCHEMA, "execrl.tasks.schema"),
}

__all__ = [
    "AssertTests",
    "CallTests",
    "Compare",
    "StdioCase",
    "StdioTests",
    "Task",
    "Tests",
    "TimeLimit",
    "VerifierTests",
    "generate_synthetic",
    "list_benchmarks",
    "load_benchmark",
    "read_tasks",
    "write_tasks",
]

if TYPE_CHECKING:
    from execrl.tasks.catalog.registry import list_benchmarks, load_benchmark
    from execrl.tasks.jsonl import read_tasks, write_tasks
    from execrl.tasks.schema import (
        AssertTests,
        CallTests,
        Compare,
        StdioCase,
        StdioTests,
        Task,
        Tests,
        TimeLimit,
        VerifierTests,
    )
    from execrl.tasks.synthetic import generate as generate_synthetic


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'execrl.tasks' has no attribute {name!r}")
    attr = "generate" if name == "generate_synthetic" else name
    return getattr(importlib.import_module(_LAZY[name]), attr)
