"""`execrl tasks validate` and the other `execrl tasks` commands."""

from __future__ import annotations

import argparse
import dataclasses
import json

import pytest

from execrl.cli.tasks_command import register
from execrl.eval.validate import validate
from execrl.sandbox.reference_runner import sandbox_runner
from execrl.tasks import load_benchmark
from execrl.tasks.defects import KNOWN_DEFECTS, TIMING_DEPENDENT
from execrl.tasks.mbpp import NON_PLAIN_RETURNS, NON_PLAIN_RETURNS_SANITIZED
from execrl.tasks.repair import OBJECT_RETURNS
from execrl.tasks.schema import TimeLimit

WITH_REFERENCES = ["humaneval", "mbpp", "mbpp-full", "mbpp-sanitized", "humanevalfix", "quixbugs"]


def _cli(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(list(argv))
    return args.handler(args)


@pytest.mark.parametrize("name", WITH_REFERENCES)
def test_a_sample_of_references_pass(data_dir, name):
    tasks = load_benchmark(name, data_dir)
    sample = tasks[:: max(1, len(tasks) // 12)]
    assert validate(sample, progress=False) == []


def test_tasks_whose_references_return_objects_pass(data_dir):
    # Each entry of the strict_returns tables is needed: with strict returns it fails.
    mbpp = [
        t
        for t in load_benchmark("mbpp-full", data_dir)
        if t.metadata["task_id"] in NON_PLAIN_RETURNS
    ]
    sanitized = [
        t
        for t in load_benchmark("mbpp-sanitized", data_dir)
        if t.metadata["task_id"] in NON_PLAIN_RETURNS_SANITIZED
    ]
    sanitized = [dataclasses.replace(t, id=f"sanitized:{t.id}") for t in sanitized]
    quix = [t for t in load_benchmark("quixbugs", data_dir) if t.id.split("/")[1] in OBJECT_RETURNS]
    tasks = mbpp + sanitized + quix
    assert len(tasks) == len(NON_PLAIN_RETURNS) + len(NON_PLAIN_RETURNS_SANITIZED) + len(
        OBJECT_RETURNS
    )
    assert validate(tasks, progress=False) == []
    strict = [dataclasses.replace(t, strict_returns=True) for t in tasks]
    failed = validate(strict, progress=False)
    assert {f.task_id for f in failed} == {t.id for t in tasks}
    assert all("NotPlainData" in f.message for f in failed)


def test_a_failing_reference_is_reported_with_its_verdict(data_dir):
    task = load_benchmark("humaneval", ids=["HumanEval/0"])[0]
    broken = dataclasses.replace(task, reference=task.prompt + "    return not True\n")
    looping = dataclasses.replace(
        task,
        id="loop",
        reference=task.prompt + "    while True: pass\n",
        time_limits={"tests": TimeLimit(wall_s=1.0)},
    )
    f1, f2 = validate([broken, looping], progress=False)
    assert (f1.task_id, f1.verdict) == ("HumanEval/0", "WRONG_ANSWER")
    assert (f2.task_id, f2.verdict) == ("loop", "TIMEOUT")


def test_list_show_validate_commands(data_dir, capsys, tmp_path):
    assert _cli("tasks", "list", "--data-dir", str(data_dir)) == 0
    out = capsys.readouterr().out
    assert "mbpp+" in out and f"{data_dir}/mbppplus/MbppPlus-v0.2.0.jsonl.gz (data dir)" in out
    assert _cli("tasks", "list", "--data-dir", str(tmp_path)) == 0
    out = capsys.readouterr().out
    assert f"MISSING: put quixbugs_python.jsonl at {tmp_path}/quixbugs/quixbugs_python.jsonl" in out
    assert "have no data (humaneval+, mbpp, mbpp-train, mbpp-full, mbpp-sanitized, mbpp+, " in out
    assert f"quixbugs, codejam) in {tmp_path} (--data-dir): put the files" in out

    assert _cli("tasks", "show", "Mbpp/11", "--data-dir", str(data_dir)) == 0
    out = capsys.readouterr().out
    assert "entry point: remove_Occ" in out and "--- reference ---" in out
    assert _cli("tasks", "show", "HumanEval/3", "--json") == 0
    assert json.loads(capsys.readouterr().out)["id"] == "HumanEval/3"
    assert _cli("tasks", "show", "nothing/1") == 2
    assert "pass --benchmark" in capsys.readouterr().err

    assert _cli("tasks", "validate", "quixbugs", "--data-dir", str(data_dir)) == 0
    assert (
        "quixbugs: 40/40 reference solutions pass; 0 known defect(s), 0 new failure(s)"
        in capsys.readouterr().out
    )
    assert _cli("tasks", "validate", "codejam", "--data-dir", str(data_dir)) == 0
    assert "511 task(s) have no reference solution" in capsys.readouterr().out
    assert _cli("tasks", "validate", "nope") == 2


def test_validate_exits_nonzero_on_a_new_failure(tmp_path, capsys):
    from execrl.tasks.jsonl import write_tasks

    task = load_benchmark("humaneval", ids=["HumanEval/0"])[0]
    path = tmp_path / "t.jsonl"
    write_tasks(path, [dataclasses.replace(task, reference=task.prompt + "    return 1\n")])
    assert _cli("tasks", "validate", f"jsonl:{path}") == 1
    assert "HumanEval/0: WRONG_ANSWER" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize("name", [*WITH_REFERENCES, "mbpp+", "humaneval+"])
def test_every_reference_passes_except_documented_defects(data_dir, name):
    tasks = load_benchmark(name, data_dir, reference_runner=sandbox_runner())
    failures = validate(tasks, progress=False)
    known = KNOWN_DEFECTS.get(name, {})
    assert {f.task_id for f in failures} <= set(known), failures
    must_fail = {i for i in known if (name, i) not in TIMING_DEPENDENT}
    assert must_fail <= {f.task_id for f in failures}  # a fixed defect must leave the list
