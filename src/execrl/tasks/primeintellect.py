"""PrimeIntellect's verifiable coding problems (`PrimeIntellect/verifiable-coding-problems`,
SYNTHETIC-1's code tasks).

Each record: `problem_id` (the task id, "vfc_..."), `source`, `task_type`, `in_source_id`,
`prompt`, `gold_standard_solution` (a reference, usually inside a ```python fence),
`verification_info` (a JSON string: `language` and `test_cases`, each of `type` "stdin_stdout"
with string `input`/`output`, or "function_call" with `fn_name`, an argument list `input` and
an `output`) and `metadata` (a JSON string: `difficulty`, `time_limit`, `memory_limit`).

The problems come from APPS, TACO, CodeContests and Codeforces, and the test cases keep APPS'
conventions (call outputs wrapped once in a list), so both kinds are graded by APPS' rules
(checker `apps`). Not verified against PrimeIntellect's own verifier, whose source we could not
read here. A record's tests must all be of one type and, for function calls, one `fn_name`.
Limits: 4 s per test (APPS'), or the metadata's `time_limit` when it gives seconds, scaled by
`contest_source.TIME_FACTOR`, capped (`MAX_TEST_S`; `?max_test_s=`).
"""

from __future__ import annotations

import functools
import re
from typing import Any

from execrl.tasks.contest_source import (
    LIMIT_OPTIONS,
    SECONDS,
    HubSource,
    LimitCaps,
    Record,
    json_value,
    judge_limit,
    limit_caps,
    read_selected,
    scaled_limits,
)
from execrl.tasks.errors import TaskDataError
from execrl.tasks.schema import CallTests, Compare, StdioCase, StdioTests, Task, Tests
from execrl.tasks.sources import field, make_task

HUB = HubSource("PrimeIntellect/verifiable-coding-problems", "train")
OPTIONS = ("source", *LIMIT_OPTIONS)
PER_TEST_S = 4.0
COMPARE = Compare(checker="apps")
_FENCE = re.compile(r"```[a-zA-Z0-9_+-]*\n(.*?)```", re.S)


def read_primeintellect(records: list[Record], options: dict[str, str]) -> list[Task]:
    source = ("source", options.get("source"))
    task = functools.partial(_task, caps=limit_caps("primeintellect", options))
    return read_selected("primeintellect", records, source, "problem_id", task)


def unfenced(text: str) -> str:
    """The code of a reference given inside a markdown fence (the last fence), else the text."""
    blocks = _FENCE.findall(text)
    return blocks[-1] if blocks else text


def _tests(where: str, cases: Any) -> tuple[Tests, str | None]:
    if not isinstance(cases, list) or not cases:
        raise TaskDataError(f"{where}: verification_info.test_cases is empty or not a list")
    kinds = {str(c.get("type")) if isinstance(c, dict) else None for c in cases}
    if kinds == {"stdin_stdout"}:
        if not all(
            isinstance(c.get("input"), str) and isinstance(c.get("output"), str) for c in cases
        ):
            raise TaskDataError(f"{where}: a stdin_stdout test case lacks a string input or output")
        return StdioTests(tuple(StdioCase(c["input"], c["output"]) for c in cases), COMPARE), None
    if kinds == {"function_call"}:
        names = {c.get("fn_name") if isinstance(c.get("fn_name"), str) else None for c in cases}
        if len(names) != 1 or not isinstance(next(iter(names)), str):
            raise TaskDataError(f"{where}: function_call test cases need one fn_name")
        if not all(isinstance(c.get("input"), list) and "output" in c for c in cases):
            raise TaskDataError(
                f"{where}: a function_call test case needs an input list and an output"
            )
        tests = CallTests(
            tuple(tuple(c["input"]) for c in cases), tuple(c["output"] for c in cases), COMPARE
        )
        return tests, next(iter(names))
    raise TaskDataError(
        f"{where}: test case types {sorted(map(str, kinds))}; expected all 'stdin_stdout' or all "
        "'function_call'"
    )


def _task(where: str, rec: dict[str, Any], caps: LimitCaps) -> Task:
    info = json_value(where, rec, "verification_info")
    if not isinstance(info, dict):
        raise TaskDataError(f"{where}: verification_info should be an object")
    language = info.get("language", "python")
    if language != "python":
        raise TaskDataError(
            f"{where}: verification_info.language {language!r}; only python is read"
        )
    tests, fn_name = _tests(where, info.get("test_cases"))
    meta = json_value(where, rec, "metadata", {})
    meta = meta if isinstance(meta, dict) else {}
    seconds = judge_limit(where, "metadata.time_limit", meta.get("time_limit"), SECONDS)
    limits = (
        scaled_limits(seconds, len(tests), caps=caps)
        if seconds
        else scaled_limits(PER_TEST_S, len(tests), factor=1.0, caps=caps)
    )
    gold = rec.get("gold_standard_solution")
    return make_task(
        where,
        id=field(where, rec, "problem_id"),
        prompt=field(where, rec, "prompt"),
        tests=tests,
        entry_point=fn_name,
        reference=unfenced(gold) if isinstance(gold, str) and gold.strip() else None,
        time_limits=limits,
        metadata={
            "source": "primeintellect",
            "origin": rec.get("source"),
            "in_source_id": rec.get("in_source_id"),
            "difficulty": meta.get("difficulty"),
        },
    )
