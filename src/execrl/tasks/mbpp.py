"""MBPP (Austin et al., 2021): the 500-task test split (ids 11-510), all 974 tasks, and the
427-task hand-verified "sanitized" subset.

Graded as the original harness does: the program, then `test_setup_code` (sanitized:
`test_imports`), then each assert of `test_list` (the `challenge_test_list` is not graded; it is
kept in the metadata). The prompt shows the asserts, as the paper's prompts do, so the visible
tests are the hidden tests.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from execrl.tasks.errors import TaskDataError
from execrl.tasks.schema import AssertTests, Task
from execrl.tasks.sources import DataFile, HubCopy, field, make_task, read_records

MBPP_FULL = DataFile(
    "mbpp",
    "mbpp.jsonl",
    hub=HubCopy(
        "google-research-datasets/mbpp",
        "full",
        splits=("train", "test", "validation", "prompt"),
        sort_key="task_id",
    ),
)
MBPP_SANITIZED = DataFile(
    "mbpp",
    "sanitized-mbpp.json",
    hub=HubCopy(
        "google-research-datasets/mbpp",
        "sanitized",
        splits=("train", "test", "validation", "prompt"),
        sort_key="task_id",
    ),
)
TEST_SPLIT = range(11, 511)
TRAIN_SPLIT = range(601, 975)  # for training on MBPP while evaluating on its test split
# References that return a re.Match, which the original harness's `==` or truth test accepts:
# their entry point may return objects (`Task.strict_returns`). Found by `execrl tasks
# validate`; tests/tasks checks each entry is needed. (Dict subclasses such as Counter are plain
# data: the sandbox sends what they store, see tasks/values.py.)
NON_PLAIN_RETURNS: dict[int, str] = {}
NON_PLAIN_RETURNS_SANITIZED = {
    737: "returns re.Match, tested for truth",
    787: "returns re.Match or None, tested against None",
    794: "returns re.Match, tested for truth",
}


def mbpp_prompt(text: str, tests: tuple[str, ...]) -> str:
    return f"{text.strip()}\nYour code should pass these tests:\n\n" + "\n".join(tests) + "\n"


def called_function(code: str, tests: tuple[str, ...]) -> str | None:
    """The function the tests call that the reference defines: the entry point."""
    try:
        defined = {
            n.name for n in ast.parse(code).body if isinstance(n, ast.FunctionDef | ast.ClassDef)
        }
        for test in tests:
            for node in ast.walk(ast.parse(test)):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                    if node.func.id in defined:
                        return node.func.id
    except SyntaxError:
        return None
    return None


def _task(
    where: str, rec: dict[str, Any], text_key: str, setup: str, source: str, objects: dict[int, str]
) -> Task:
    task_id = field(where, rec, "task_id", int)
    text = field(where, rec, text_key)
    code = field(where, rec, "code").replace("\r\n", "\n")
    tests = tuple(field(where, rec, "test_list", list))
    if not all(isinstance(t, str) for t in tests):
        raise TaskDataError(f"{where}: field 'test_list' must hold strings")
    graded = AssertTests(setup=setup, statements=tests)
    return make_task(
        where,
        id=f"Mbpp/{task_id}",
        prompt=mbpp_prompt(text, tests),
        tests=graded,
        visible_tests=graded,
        entry_point=called_function(code, tests),
        reference=code,
        metadata={
            "source": source,
            "task_id": task_id,
            "challenge_tests": list(rec.get("challenge_test_list") or []),
        },
        strict_returns=task_id not in objects,
    )


SPLITS = {"test": TEST_SPLIT, "train": TRAIN_SPLIT}  # the paper's split by task id


def read_mbpp(path: Path, split: str | None) -> list[Task]:
    """All tasks (split None) or one split of the original paper's, checked to be complete."""
    tasks = []
    source = {"test": "mbpp", "train": "mbpp-train", None: "mbpp-full"}[split]
    for where, rec in read_records(path):
        setup = field(where, rec, "test_setup_code").replace("\r\n", "\n")
        task = _task(where, rec, "text", setup, source, NON_PLAIN_RETURNS)
        if split is None or task.metadata["task_id"] in SPLITS[split]:
            tasks.append(task)
    if split is not None and len(tasks) != len(SPLITS[split]):
        ids = SPLITS[split]
        raise TaskDataError(
            f"{path}: the {split} split (task ids {ids.start}-{ids.stop - 1}) should have "
            f"{len(ids)} tasks, found {len(tasks)}"
        )
    return tasks


def read_mbpp_sanitized(path: Path) -> list[Task]:
    tasks = []
    for where, rec in read_records(path):
        imports = field(where, rec, "test_imports", list)
        setup = "\n".join(imports)
        tasks.append(
            _task(where, rec, "prompt", setup, "mbpp-sanitized", NON_PLAIN_RETURNS_SANITIZED)
        )
    return tasks
