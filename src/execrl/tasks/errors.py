"""Errors of the tasks layer. Each names the file, the record and what to do."""

from __future__ import annotations


class TaskDataError(ValueError):
    """A data or task file that is corrupt, truncated or not in the expected format."""


class DataNotFound(FileNotFoundError):
    """A benchmark's data is in none of the places execrl looks."""


class UnknownBenchmark(ValueError):
    """A benchmark name that is not registered."""
