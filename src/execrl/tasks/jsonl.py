"""execrl's own task format: one JSON object per line, versioned.

    {"schema": "execrl.task", "version": 1, "id": "...", "prompt": "...", "language": "python",
     "entry_point": "f", "reference": "def f(x): ...",
     "tests": {"kind": "call", "inputs": [...], "expected": [...], "compare": {"atol": 0.0, ...}},
     "visible_tests": null, "base_tests": null, "time_limits": {"base": {"wall_s": 2.0}},
     "strict_returns": true, "prelude": "", "metadata": {"source": "..."}}

Test kinds: `{"kind": "assert", "setup": str, "statements": [str]}`,
`{"kind": "call", "inputs": [[arg, ...]], "expected": [value], "compare": {...}}`,
`{"kind": "stdio", "cases": [{"stdin": str, "stdout": str}], "compare": {...}}`,
`{"kind": "verifier", "verifier": "sql", "spec": {...}, "wrong": str}` (docs/verifiers.md).
Values inside inputs, expected and metadata are tagged JSON (`execrl.tasks.values`), so tuples,
sets and non-finite floats survive the round trip.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from execrl.tasks.errors import TaskDataError
from execrl.tasks.limit_caps import capped
from execrl.tasks.schema import (
    SCHEMA_VERSION,
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
from execrl.tasks.values import from_json, to_json

SCHEMA_NAME = "execrl.task"


def tests_to_dict(t: Tests) -> dict[str, Any]:
    if isinstance(t, AssertTests):
        return {"kind": "assert", "setup": t.setup, "statements": list(t.statements)}
    if isinstance(t, CallTests):
        return {
            "kind": "call",
            "inputs": [to_json(list(args)) for args in t.inputs],
            "expected": [to_json(v) for v in t.expected],
            "compare": dataclasses.asdict(t.compare),
        }
    if isinstance(t, VerifierTests):
        return {
            "kind": "verifier",
            "verifier": t.verifier,
            "spec": t.spec,  # plain JSON, readable and writable by hand
            "wrong": t.wrong,
        }
    return {
        "kind": "stdio",
        "cases": [{"stdin": c.stdin, "stdout": c.stdout} for c in t.cases],
        "compare": dataclasses.asdict(t.compare),
    }


def tests_from_dict(d: Any) -> Tests:
    if not isinstance(d, dict):
        raise ValueError(f"tests must be an object, got {type(d).__name__}")
    kind = d.get("kind")
    if kind == "assert":
        return AssertTests(setup=_str(d.get("setup", "")), statements=_strs(d["statements"]))
    if kind == "call":
        inputs, expected = d["inputs"], d["expected"]
        if not isinstance(inputs, list) or not all(isinstance(a, list) for a in inputs):
            raise ValueError("call tests: 'inputs' must be a list of argument lists")
        if not isinstance(expected, list) or len(expected) != len(inputs):
            raise ValueError("call tests: 'expected' must be a list, one value per input")
        return CallTests(
            inputs=tuple(tuple(from_json(a)) for a in inputs),
            expected=tuple(from_json(v) for v in expected),
            compare=Compare(**d.get("compare", {})),
        )
    if kind == "stdio":
        cases = tuple(StdioCase(_str(c["stdin"]), _str(c["stdout"])) for c in d["cases"])
        return StdioTests(cases=cases, compare=Compare(**d.get("compare", {})))
    if kind == "verifier":
        spec = d.get("spec", {})
        if not isinstance(spec, dict):
            raise ValueError("verifier tests: 'spec' must be a JSON object")
        return VerifierTests(_str(d["verifier"]), spec, _str(d.get("wrong", "")))
    raise ValueError(
        f"unknown test kind {kind!r} (expected 'assert', 'call', 'stdio' or 'verifier')"
    )


def task_to_dict(task: Task) -> dict[str, Any]:
    return {
        "schema": SCHEMA_NAME,
        "version": SCHEMA_VERSION,
        "id": task.id,
        "prompt": task.prompt,
        "language": task.language,
        "entry_point": task.entry_point,
        "reference": task.reference,
        "tests": tests_to_dict(task.tests),
        "visible_tests": tests_to_dict(task.visible_tests) if task.visible_tests else None,
        "base_tests": tests_to_dict(task.base_tests) if task.base_tests else None,
        "time_limits": {k: dataclasses.asdict(v) for k, v in task.time_limits.items()},
        "strict_returns": task.strict_returns,
        "prelude": task.prelude,
        "metadata": to_json(dict(task.metadata)),
    }


def task_from_dict(d: Any) -> Task:
    """One task from its JSON object; raises ValueError/KeyError/TypeError on a bad record."""
    if not isinstance(d, dict):
        raise ValueError(f"a task must be a JSON object, got {type(d).__name__}")
    if d.get("schema") != SCHEMA_NAME:
        raise ValueError(f"'schema' must be {SCHEMA_NAME!r}, got {d.get('schema')!r}")
    if d.get("version") != SCHEMA_VERSION:
        raise ValueError(
            f"schema version {d.get('version')!r} is not supported (this execrl reads "
            f"version {SCHEMA_VERSION}); upgrade execrl or rewrite the file"
        )
    opt = {k: tests_from_dict(d[k]) for k in ("visible_tests", "base_tests") if d.get(k)}
    return Task(
        id=_str(d["id"]),
        prompt=_str(d["prompt"]),
        tests=tests_from_dict(d["tests"]),
        entry_point=d.get("entry_point"),
        language=_str(d.get("language", "python")),
        reference=d.get("reference"),
        metadata=from_json(d["metadata"]) if d.get("metadata") else {},  # may be left out
        time_limits={k: TimeLimit(**capped(v)) for k, v in (d.get("time_limits") or {}).items()},
        strict_returns=bool(d.get("strict_returns", True)),
        prelude=_str(d.get("prelude", "")),
        **opt,
    )


def write_tasks(path: str | Path, tasks: Iterable[Task]) -> int:
    """Write tasks as JSONL, atomically (a crash never leaves half a file); returns the count."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    n = 0
    with open(tmp, "w", encoding="utf-8") as f:
        for task in tasks:
            f.write(json.dumps(task_to_dict(task), ensure_ascii=False) + "\n")
            n += 1
    tmp.replace(path)
    return n


def read_json_lines(path: str | Path, text: str | None = None) -> Iterator[tuple[int, Any]]:
    """(line number, object) for each non-blank line; a bad line is a TaskDataError naming it."""
    if text is None:
        text = Path(path).read_text(encoding="utf-8")
    lines = text.split("\n")
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield i, json.loads(line)
        except json.JSONDecodeError as exc:
            last = i == len(lines) or (i == len(lines) - 1 and not lines[-1])
            hint = " (the file looks truncated)" if last and not text.endswith("\n") else ""
            # exc.msg alone ends "... starting at", its position cut off: the column is said
            where = f"{exc.msg}: column {exc.colno}"
            raise TaskDataError(f"{path}:{i}: not valid JSON{hint}: {where}") from None


def read_tasks(path: str | Path) -> list[Task]:
    """Tasks from an execrl JSONL file; errors name the file and line."""
    tasks: list[Task] = []
    seen: dict[str, int] = {}
    for line, obj in read_json_lines(path):
        try:
            task = task_from_dict(obj)
        except (KeyError, TypeError, ValueError) as exc:
            what = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
            raise TaskDataError(f"{path}:{line}: bad task record: {what}") from None
        if task.id in seen:
            raise TaskDataError(f"{path}:{line}: task id {task.id!r} repeats line {seen[task.id]}")
        seen[task.id] = line
        tasks.append(task)
    if not tasks:
        raise TaskDataError(f"{path}: the file holds no tasks")
    return tasks


def _str(v: Any) -> str:
    if not isinstance(v, str):
        raise ValueError(f"expected a string, got {type(v).__name__}")
    return v


def _strs(v: Any) -> tuple[str, ...]:
    if not isinstance(v, list):
        raise ValueError(f"expected a list of strings, got {type(v).__name__}")
    return tuple(_str(x) for x in v)
