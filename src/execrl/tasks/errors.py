"""Errors of the tasks layer. Each names the file, the record and what to do."""

from __future__ import annotations

import difflib
from collections.abc import Sequence


class TaskDataError(ValueError):
    """A data or task file that is corrupt, truncated or not in the expected format."""


class DataNotFound(FileNotFoundError):
    """A benchmark's data is in none of the places execrl looks."""


class UnknownBenchmark(ValueError):
    """A benchmark name that is not registered."""


class NoSuchTask(TaskDataError):
    """A task id its benchmark does not have; says what its ids look like and the nearest."""

    def __init__(self, where: str, task_id: str, known: Sequence[str]) -> None:
        near = difflib.get_close_matches(task_id, known, n=3, cutoff=0.6)
        form = f"its {len(known)} ids run {known[0]} ... {known[-1]}" if known else "no tasks"
        super().__init__(
            f"{where}: no task {task_id!r}; {form}"
            + (f"; nearest: {', '.join(near)}" if near else "")
        )
