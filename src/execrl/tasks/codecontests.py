"""CodeContests (`deepmind/code_contests`, AlphaCode's data).

Each record: `name` (the task id, e.g. "1548_E. Gregor and the Two Painters"), `description`,
`public_tests`, `private_tests` and `generated_tests` (each `{"input": [...], "output": [...]}`),
`solutions` and `incorrect_solutions` (`{"language": [code], "solution": [program]}`, language
codes 0 unknown, 1 Python 2, 2 C++, 3 Python 3, 4 Java), `time_limit` (`{"seconds", "nanos"}`
or null), `memory_limit_bytes`, `difficulty`, `source`, `cf_rating`, `cf_tags`. Upstream ships
parquet; a JSONL export of the same records reads the same.

Tests: public, then private, then generated (AlphaCode's evaluation uses all three); the option
`tests=public,private` picks groups. Judged as code_contests' `OutputsMatch`
(execution/tester_sandboxer.cc; checker `codecontests`): lowercase tokens, numbers within an
absolute 1e-5. Limits: the problem's `time_limit` per test (2 s where it is null, Codeforces'
usual) and `memory_limit_bytes`, scaled by `contest_source.TIME_FACTOR`/`MEMORY_FACTOR` and
capped (`MAX_TEST_S`, `MAX_MEMORY_MB`; `?max_test_s=&max_memory_mb=`). The
reference is the first Python 3 solution; the other solutions' counts are in the metadata.
"""

from __future__ import annotations

import math
from typing import Any

from execrl.tasks.contest_source import (
    LIMIT_OPTIONS,
    HubSource,
    LimitCaps,
    Record,
    limit_caps,
    named,
    scaled_limits,
)
from execrl.tasks.errors import TaskDataError
from execrl.tasks.schema import Compare, StdioCase, StdioTests, Task
from execrl.tasks.sources import field, make_task

HUB = HubSource("deepmind/code_contests", "test")
OPTIONS = ("tests", *LIMIT_OPTIONS)
GROUPS = ("public_tests", "private_tests", "generated_tests")
LANGUAGES = {0: "unknown", 1: "python2", 2: "cpp", 3: "python3", 4: "java"}
PYTHON3 = 3
DEFAULT_TIME_S = 2.0
COMPARE = Compare(checker="codecontests")


def read_codecontests(records: list[Record], options: dict[str, str]) -> list[Task]:
    groups = GROUPS
    if "tests" in options:
        groups = tuple(f"{g.strip()}_tests" for g in options["tests"].split(",") if g.strip())
        bad = [g for g in groups if g not in GROUPS]
        if bad or not groups:
            raise TaskDataError(
                f"codecontests: tests={options['tests']!r}; choose among public,private,generated"
            )
    caps = limit_caps("codecontests", options)
    return [_task(named(where, rec.get("name")), rec, groups, caps) for where, rec in records]


def _group(where: str, rec: dict[str, Any], name: str) -> list[StdioCase]:
    value = field(where, rec, name, dict)
    inputs, outputs = value.get("input"), value.get("output")
    if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs):
        raise TaskDataError(f"{where}: {name} needs 'input' and 'output' lists of one length")
    if not all(isinstance(x, str) for x in inputs + outputs):
        raise TaskDataError(f"{where}: {name}: every input and output should be a string")
    return [StdioCase(a, b) for a, b in zip(inputs, outputs, strict=True)]


def _solutions(where: str, rec: dict[str, Any], name: str) -> list[tuple[int, str]]:
    value = rec.get(name) or {"language": [], "solution": []}
    if not isinstance(value, dict):
        raise TaskDataError(
            f"{where}: {name} should be an object of 'language' and 'solution' lists"
        )
    langs, programs = value.get("language"), value.get("solution")
    if not isinstance(langs, list) or not isinstance(programs, list) or len(langs) != len(programs):
        raise TaskDataError(f"{where}: {name} needs 'language' and 'solution' lists of one length")
    return list(zip(langs, programs, strict=True))


def _time_s(where: str, rec: dict[str, Any]) -> float:
    limit = rec.get("time_limit")
    if limit is None:
        return DEFAULT_TIME_S
    if not isinstance(limit, dict):
        raise TaskDataError(f"{where}: time_limit should be {{'seconds', 'nanos'}} or null")
    parts = [limit.get("seconds") or 0, limit.get("nanos") or 0]
    if not all(_nonnegative(p) for p in parts):
        raise TaskDataError(
            f"{where}: time_limit {limit!r}: seconds and nanos should be numbers >= 0"
        )
    seconds = float(parts[0]) + float(parts[1]) / 1e9
    return seconds or DEFAULT_TIME_S


def _nonnegative(value: Any) -> bool:
    """A number >= 0 within float's range."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value) and value >= 0
    except OverflowError:  # an int past float's range
        return False


def _memory_bytes(where: str, rec: dict[str, Any]) -> int | None:
    memory = rec.get("memory_limit_bytes")
    if memory is None:
        return None
    if not _nonnegative(memory):
        raise TaskDataError(f"{where}: memory_limit_bytes {memory!r} should be a number >= 0")
    return int(memory)


def _task(where: str, rec: dict[str, Any], groups: tuple[str, ...], caps: LimitCaps) -> Task:
    name = field(where, rec, "name")
    public = _group(where, rec, "public_tests")
    cases = [c for g in groups for c in (public if g == "public_tests" else _group(where, rec, g))]
    if not cases:
        raise TaskDataError(f"{where}: the problem has an empty test list ({', '.join(groups)})")
    solutions = _solutions(where, rec, "solutions")
    reference = next((p for lang, p in solutions if lang == PYTHON3), None)
    counts: dict[str, int] = {}
    for lang, _ in solutions:
        key = LANGUAGES.get(lang, str(lang)) if isinstance(lang, int) else str(lang)
        counts[key] = counts.get(key, 0) + 1
    memory = _memory_bytes(where, rec)
    return make_task(
        where,
        id=name,
        prompt=(
            f"{field(where, rec, 'description').rstrip()}\n\nWrite a whole Python program that "
            "reads the input from stdin and writes the answer to stdout.\n"
        ),
        tests=StdioTests(tuple(cases), COMPARE),
        visible_tests=StdioTests(tuple(public), COMPARE) if public else None,
        reference=reference,
        time_limits=scaled_limits(_time_s(where, rec), len(cases), memory, caps=caps),
        metadata={
            "source": "codecontests",
            "contest_source": rec.get("source"),
            "difficulty": rec.get("difficulty"),
            "cf_rating": rec.get("cf_rating"),
            "cf_tags": rec.get("cf_tags"),
            "solutions_by_language": counts,
            "groups": [g.removesuffix("_tests") for g in groups],
        },
    )
