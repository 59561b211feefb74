"""Tasks as JSON, for frameworks that carry the ground truth as a string (verl's parquet rows).

Call inputs and expected values are execrl's tagged JSON (`execrl.tasks.values`, within the
sandbox's limits), so tuples, sets and bytes survive the round trip exactly.
"""

from __future__ import annotations

import json
from typing import Any

from execrl.tasks import values
from execrl.tasks.schema import AssertTests, CallTests, Compare, StdioCase, StdioTests, Task, Tests


def tests_to_json(tests: Tests) -> dict[str, Any]:
    if isinstance(tests, AssertTests):
        return {"kind": "assert", "setup": tests.setup, "statements": list(tests.statements)}
    compare = {
        "atol": tests.compare.atol,
        "rtol": tests.compare.rtol,
        "unordered": tests.compare.unordered,
        "case_insensitive": tests.compare.case_insensitive,
        "tokens": tests.compare.tokens,
    }
    if isinstance(tests, CallTests):
        return {
            "kind": "call",
            "inputs": values.encode(tuple(tuple(a) for a in tests.inputs)),
            "expected": values.encode(tuple(tests.expected)),
            "compare": compare,
        }
    return {
        "kind": "stdio",
        "cases": [{"stdin": c.stdin, "stdout": c.stdout} for c in tests.cases],
        "compare": compare,
    }


def tests_from_json(data: dict[str, Any], where: str = "ground_truth") -> Tests:
    kind = data.get("kind")
    compare = Compare(**data.get("compare", {}))
    if kind == "assert":
        return AssertTests(data.get("setup", ""), tuple(data["statements"]))
    if kind == "call":
        return CallTests(values.loads(data["inputs"]), values.loads(data["expected"]), compare)
    if kind == "stdio":
        cases = tuple(StdioCase(c["stdin"], c["stdout"]) for c in data["cases"])
        return StdioTests(cases, compare)
    raise ValueError(f"{where}: tests kind {kind!r} must be assert, call or stdio")


def task_to_json(task: Task) -> str:
    return json.dumps(
        {
            "id": task.id,
            "prompt": task.prompt,
            "entry_point": task.entry_point,
            "tests": tests_to_json(task.tests),
            "visible_tests": tests_to_json(task.visible_tests) if task.visible_tests else None,
        }
    )


def task_from_json(text: str | dict[str, Any]) -> Task:
    data = json.loads(text) if isinstance(text, str) else text
    try:
        visible = data.get("visible_tests")
        return Task(
            id=str(data.get("id", "")),
            prompt=data.get("prompt", ""),
            tests=tests_from_json(data["tests"], f"task {data.get('id')}: tests"),
            entry_point=data.get("entry_point"),
            visible_tests=tests_from_json(visible, "visible_tests") if visible else None,
        )
    except (KeyError, TypeError) as exc:
        raise ValueError(
            f"ground truth is not an execrl task (missing or bad field {exc}); build it with "
            "execrl.rewards.adapters.ground_truth.task_to_json"
        ) from exc
