"""APPS (`codeparrot/apps`) and TACO (`BAAI/TACO`), which shares its layout.

Each record: `question`, `solutions` (a JSON string: a list of Python programs), `input_output`
(a JSON string: `inputs`, `outputs`, and `fn_name` for call-based problems), `starter_code`,
`difficulty`; APPS adds `problem_id` and `url`, TACO `name`, `source`, `tags`, `time_limit`
("2 seconds") and `memory_limit` ("256 megabytes"). A task's id is APPS' `problem_id`; TACO
records carry no id, so a TACO task's id is its row number in the file (0-based, the index of
the record in the Hugging Face split).

Graded as APPS' eval/testing_util.py does (checker `apps`, `sandbox/grading/checkers.py`), which TACO's
harness copies: standard-input problems through APPS' cascade of comparisons, call-based ones
by `==`, or `==` the expected output's first element (APPS wraps outputs once). A list-valued
input or output of a stdin test is joined with newlines, as there. Call-based problems whose
starter code defines `class Solution` (LeetCode) call the method on one instance per run,
others the top-level function `fn_name`; APPS decides by looking for "class Solution" in the
candidate's code, here the starter code decides, so a candidate must keep the starter's shape.
A dict first argument or output has its keys turned to ints, as APPS does. APPS prepends a
block of imports to every program (`APPS_IMPORTS`, without numpy): the reference is that block
and the first of `solutions`; the prompt shows the block, and a completion graded through
`execrl eval` or `eval-samples` gets the import lines it lacks from its prompt.

Limits: APPS' harness gives each test 4 s; TACO's `time_limit` (a judge's, for C++) is scaled by
`contest_source.TIME_FACTOR`, its `memory_limit` by `MEMORY_FACTOR`, both capped
(`MAX_TEST_S`, `MAX_MEMORY_MB`; `?max_test_s=&max_memory_mb=`).
"""

from __future__ import annotations

import math
from typing import Any

from execrl.tasks.contest_source import (
    LIMIT_OPTIONS,
    MEGABYTES,
    SECONDS,
    HubSource,
    LimitCaps,
    Record,
    json_value,
    judge_limit,
    limit_caps,
    named,
    scaled_limits,
)
from execrl.tasks.errors import TaskDataError
from execrl.tasks.schema import CallTests, Compare, StdioCase, StdioTests, Task, Tests
from execrl.tasks.sources import field, make_task

APPS_HUB = HubSource("json", "train", data_files="hf://datasets/codeparrot/apps/test.jsonl")
TACO_HUB = HubSource("BAAI/TACO", "test")
OPTIONS = ("difficulty", *LIMIT_OPTIONS)
APPS_PER_TEST_S = 4.0  # APPS testing_util: TIMEOUT = 4
COMPARE = Compare(checker="apps")


def read_apps(records: list[Record], options: dict[str, str]) -> list[Task]:
    return _read(records, options, "apps")


def read_taco(records: list[Record], options: dict[str, str]) -> list[Task]:
    return _read(records, options, "taco")


def _read(records: list[Record], options: dict[str, str], source: str) -> list[Task]:
    wanted = options.get("difficulty")
    caps = limit_caps(source, options)
    tasks = []
    for row, (where, rec) in enumerate(records):
        task_id = str(field(where, rec, "problem_id", int)) if source == "apps" else str(row)
        where = named(where, task_id)
        if wanted is not None and str(rec.get("difficulty")) != wanted:
            continue
        tasks.append(_task(where, rec, task_id, source, caps))
    if not tasks:
        raise TaskDataError(f"{source}: no record has difficulty {wanted!r}")
    return tasks


def _task(where: str, rec: dict[str, Any], task_id: str, source: str, caps: LimitCaps) -> Task:
    question = field(where, rec, "question")
    io = json_value(where, rec, "input_output")
    if not isinstance(io, dict):
        raise TaskDataError(f"{where}: input_output should be an object with inputs and outputs")
    inputs, outputs = io.get("inputs"), io.get("outputs")
    if not isinstance(inputs, list) or not isinstance(outputs, list):
        raise TaskDataError(f"{where}: input_output needs 'inputs' and 'outputs' lists")
    if len(inputs) != len(outputs):
        raise TaskDataError(f"{where}: {len(inputs)} inputs but {len(outputs)} outputs")
    if not inputs:
        raise TaskDataError(f"{where}: the problem has an empty test list")
    starter = rec.get("starter_code") or ""
    if not isinstance(starter, str):
        raise TaskDataError(
            f"{where}: field 'starter_code' has the wrong type ({type(starter).__name__})"
        )
    fn_name = io.get("fn_name")
    tests: Tests
    if fn_name:
        tests = _call_tests(where, inputs, outputs)
        entry = f"Solution.{fn_name}" if "class Solution" in starter else str(fn_name)
    else:
        tests = _stdio_tests(where, inputs, outputs)
        entry = None
    solutions = json_value(where, rec, "solutions", [])
    if not isinstance(solutions, list):
        raise TaskDataError(f"{where}: solutions should be a list of programs")
    return make_task(
        where,
        id=task_id,
        prompt=_prompt(question, starter, fn_name),
        tests=tests,
        entry_point=entry,
        # as APPS runs it: its imports, then the solution
        reference=APPS_IMPORTS + solutions[0]
        if solutions and isinstance(solutions[0], str)
        else None,
        time_limits=_limits(where, rec, len(tests), source, caps),
        metadata={
            "source": source,
            "difficulty": rec.get("difficulty"),
            "url": rec.get("url"),
            "name": rec.get("name"),
            "starter_code": starter,
            "n_solutions": len(solutions),
        },
    )


def _text(where: str, i: int, what: str, value: Any) -> str:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "\n".join(value)  # APPS joins list-valued stdio tests with newlines
    if not isinstance(value, str):
        raise TaskDataError(f"{where}: stdin test {i}: the {what} should be a string")
    return value


def _stdio_tests(where: str, inputs: list[Any], outputs: list[Any]) -> StdioTests:
    cases = tuple(
        StdioCase(_text(where, i, "input", a), _text(where, i, "output", b))
        for i, (a, b) in enumerate(zip(inputs, outputs, strict=True))
    )
    return StdioTests(cases, COMPARE)


def _int_keys(value: dict[Any, Any]) -> dict[Any, Any]:
    try:
        return {int(k): v for k, v in value.items()}
    except (TypeError, ValueError):
        return value  # APPS' bare except: the keys stay as they are


def _call_tests(where: str, inputs: list[Any], outputs: list[Any]) -> CallTests:
    args_list, expected = [], []
    for i, (args, out) in enumerate(zip(inputs, outputs, strict=True)):
        if not isinstance(args, list):
            raise TaskDataError(f"{where}: call test {i}: the input should be a list of arguments")
        # APPS turns a dict first argument's keys into ints and keeps that argument alone.
        if args and isinstance(args[0], dict):
            converted = _int_keys(args[0])
            if converted is not args[0]:
                args = [converted]
        if isinstance(out, dict):
            converted = _int_keys(out)
            out = [converted] if converted is not out else out
        elif isinstance(out, list) and out and isinstance(out[0], dict):
            converted = _int_keys(out[0])
            out = [converted] if converted is not out[0] else out
        args_list.append(tuple(args))
        expected.append(out)
    return CallTests(tuple(args_list), tuple(expected), COMPARE)


def _limits(
    where: str, rec: dict[str, Any], n_tests: int, source: str, caps: LimitCaps
) -> dict[str, Any]:
    seconds = judge_limit(where, "time_limit", rec.get("time_limit"), SECONDS)
    megabytes = judge_limit(where, "memory_limit", rec.get("memory_limit"), MEGABYTES)
    memory = math.ceil(megabytes * (1 << 20)) if megabytes else None
    if source == "taco" and seconds:
        return scaled_limits(seconds, n_tests, memory, caps=caps)
    return scaled_limits(APPS_PER_TEST_S, n_tests, memory, factor=1.0, caps=caps)


# APPS' testing_util prepends this to every program it runs (`sol`), and TACO's copies it, so
# solutions (LeetCode ones annotate with `List` unimported) may rely on these names. Its
# `import numpy as np` line is left out: numpy is not importable in execrl's sandbox.
APPS_IMPORTS = """import sys
import time
import itertools
from itertools import accumulate, product, permutations, combinations
import collections
from collections import Counter, OrderedDict, deque, defaultdict, ChainMap
from functools import lru_cache
import math
from math import sqrt, sin, cos, tan, ceil, fabs, floor, gcd, exp, log, log2
import fractions
from typing import List, Tuple
import random
import heapq
from heapq import *
"""


def _prompt(question: str, starter: str, fn_name: object) -> str:
    """The question, then APPS' imports and the starter code in one fence: `execrl eval` and
    `eval-samples` add the import lines a completion lacks from its prompt, as APPS adds them."""
    code = APPS_IMPORTS + (f"\n{starter.rstrip()}\n" if starter else "")
    if fn_name:
        ask = f"Write the Python function `{fn_name}`" + (
            ", completing the starter code" if starter else ""
        )
    else:
        ask = "Write a whole Python program that reads the input from stdin and writes the answer to stdout"
    return f"{question.rstrip()}\n\n{ask}; these imports are available:\n```python\n{code}```\n"
