"""The task schema and execrl's JSONL format: round trips, versions, and errors for people."""

from __future__ import annotations

import collections
import json
import math

import pytest

from execrl.tasks import values
from execrl.tasks.errors import TaskDataError
from execrl.tasks.jsonl import read_tasks, task_to_dict, write_tasks
from execrl.tasks.schema import (
    AssertTests,
    CallTests,
    Compare,
    StdioCase,
    StdioTests,
    Task,
    TimeLimit,
)

ODD_VALUES = [
    (1, (2, 3)),
    {1, 2},
    frozenset({"a"}),
    {"k": [1.5, None]},
    b"\x00\xff",
    1 + 2j,
    math.inf,
    -math.inf,
    True,
    "s",
    [[]],
]


def _tasks() -> list[Task]:
    call = CallTests(
        inputs=tuple((v,) for v in ODD_VALUES),
        expected=tuple(ODD_VALUES),
        compare=Compare(atol=1e-6, oracle="evalplus"),
    )
    return [
        Task(
            "a/1",
            "p",
            AssertTests("def check(c):\n    assert c(1) == 2", ("check(candidate)",)),
            "f",
            reference="def f(x):\n    return x + 1",
        ),
        Task(
            "a/2",
            "p",
            call,
            "f",
            base_tests=call[:3],
            time_limits={"base": TimeLimit(2.0, 1.0)},
            strict_returns=False,
            metadata={"difficulty": 3, "t": (1, 2)},
        ),
        Task(
            "a/3",
            "p",
            StdioTests(
                (StdioCase("1\n", "Case #1: 2\n"),),
                Compare(atol=1e-6, rtol=1e-6, either_tolerance=True),
            ),
            visible_tests=StdioTests((StdioCase("", "x"),)),
        ),
    ]


def test_round_trip_keeps_every_field(tmp_path):
    path = tmp_path / "t.jsonl"
    assert write_tasks(path, _tasks()) == 3
    back = read_tasks(path)
    assert back == _tasks()
    assert back[1].plus_tests == back[1].tests[3:]
    assert back[1].metadata["t"] == (1, 2)  # a tuple, not a list


def test_the_tagged_json_of_each_kind_of_value_is_pinned_to_the_byte():
    # one encoder (tasks/values.py) for task files, the sandbox and EvalPlus's reference driver
    # (tests/tasks/test_reference_outputs.py pins the driver's lines)
    odd = (1, {2}, frozenset(), b"\x00x", math.nan, -math.inf, -0.0, 1 + 2j, {"a": [None, True]},
           {(1,): "k"}, "\u00e9", [[]])  # fmt: skip
    text = (
        '{"$t":[1,{"$s":[2]},{"$fs":[]},{"$b":"AHg="},{"$f":"nan"},{"$f":"-inf"},-0.0,'
        '{"$c":[1.0,2.0]},{"$d":[["a",[null,true]]]},{"$d":[[{"$t":[1]},"k"]]},"\\u00e9",[[]]]}'
    )
    assert values.encode(odd) == text  # the sandbox's: compact, within its limits
    assert values.to_json(odd) == values.to_json(odd, values.SANDBOX) == json.loads(text)
    assert json.dumps(values.to_json(odd)) == json.dumps(json.loads(text))  # a task file's
    back = values.loads(text)
    assert repr(back[:4] + back[5:]) == repr(odd[:4] + odd[5:]) and math.isnan(back[4])
    assert repr(values.from_json(json.loads(text))) == repr(back)


def test_a_dict_subclass_is_stored_by_no_task_file_and_crosses_the_sandbox_as_the_dict_it_is():
    counts = collections.Counter("aab")
    with pytest.raises(values.NotPlainData, match="'Counter', which is not plain data"):
        values.to_json(counts)
    assert values.encode(counts) == '{"$d":[["a",2],["b",1]]}'
    deep: list = []
    for _ in range(values.MAX_DEPTH + 1):
        deep = [deep]
    assert values.to_json(deep) == deep  # a task file's value may be as deep as it is
    with pytest.raises(values.NotPlainData, match=values.TOO_LARGE):
        values.encode(deep)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(version=99), "schema version 99 is not supported"),
        (lambda d: d.update(schema="other"), "'schema' must be 'execrl.task'"),
        (lambda d: d.pop("tests"), "missing field 'tests'"),
        (lambda d: d["tests"].update(kind="weird"), "unknown test kind 'weird'"),
        (lambda d: d["tests"].update(statements=[]), "it has no tests"),
        (lambda d: d["tests"].update(statements="assert 1"), "expected a list of strings"),
    ],
)
def test_bad_records_name_file_and_line(tmp_path, edit, message):
    good = task_to_dict(_tasks()[0])
    bad = task_to_dict(_tasks()[0])
    bad["id"] = "a/9"
    edit(bad)
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(good) + "\n\n" + json.dumps(bad) + "\n")
    with pytest.raises(TaskDataError, match=rf"t.jsonl:3: bad task record: .*{message}"):
        read_tasks(path)


def test_truncated_duplicate_and_empty_files(tmp_path):
    path = tmp_path / "t.jsonl"
    line = json.dumps(task_to_dict(_tasks()[0]))
    path.write_text(line + "\n" + line[:40])
    with pytest.raises(
        TaskDataError, match=r"t.jsonl:2: not valid JSON \(the file looks truncated\)"
    ):
        read_tasks(path)
    path.write_text(line + "\n" + line + "\n")
    with pytest.raises(TaskDataError, match=r"t.jsonl:2: task id 'a/1' repeats line 1"):
        read_tasks(path)
    path.write_text("\n")
    with pytest.raises(TaskDataError, match="holds no tasks"):
        read_tasks(path)


def test_schema_checks():
    with pytest.raises(ValueError, match="task x: it has no tests"):
        Task("x", "p", CallTests())
    with pytest.raises(ValueError, match="unknown comparison oracle"):
        Compare(oracle="nope")
    call = CallTests(((1,), (2,)), (1, 2))
    with pytest.raises(ValueError, match="tests must start with the base_tests"):
        Task("x", "p", call[:1], "f", base_tests=call)
    asserts = AssertTests("", ("assert f(1)", "assert f(2)", "assert f(3)"))
    t = Task("x", "p", asserts, "f", base_tests=AssertTests("", asserts.statements[:1]))
    assert t.plus_tests == AssertTests("", ("assert f(2)", "assert f(3)"))
    assert Task("y", "p", call).plus_tests is None
