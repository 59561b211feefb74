"""The verifier suites as benchmarks: names, splits, determinism, and `execrl tasks validate`."""

from __future__ import annotations

import dataclasses
import json

import pytest

from execrl.cli import main
from execrl.eval.validate import verifier_failures
from execrl.tasks.catalog.registry import load_benchmark
from execrl.tasks.errors import UnknownBenchmark
from execrl.tasks.jsonl import task_from_dict, task_to_dict
from execrl.tasks.schema import VerifierTests
from execrl.tasks.suites import SPLIT_BY_INSTANCE, SUITES
from verifiers.verifier_helpers import needs_iverilog


@pytest.mark.parametrize("suite", list(SUITES))
def test_each_suite_is_a_benchmark_with_levels_and_disjoint_splits(suite, request):
    if suite == "testgen":  # its functions are MBPP's and HumanEval's
        request.getfixturevalue("data_env")
    train = load_benchmark(suite)
    test = load_benchmark(f"{suite}:split=test")
    assert len(train) == len(test) == 24  # 8 per level, 3 levels
    assert {t.metadata["difficulty"] for t in train} == {1, 2, 3}
    assert not {repr(t.tests.spec) for t in train} & {repr(t.tests.spec) for t in test}
    if suite not in SPLIT_BY_INSTANCE:  # a held-out prompt is never a training prompt
        many = load_benchmark(f"{suite}:n=40"), load_benchmark(f"{suite}:split=test,n=20")
        assert not {t.prompt for t in many[0]} & {t.prompt for t in many[1]}
    for t in train:
        assert isinstance(t.tests, VerifierTests) and t.tests.verifier == suite
        assert t.reference and t.tests.wrong and t.tests.wrong != t.reference
        assert task_from_dict(task_to_dict(t)) == t  # the JSONL schema keeps verifier tests
    again = load_benchmark(f"{suite}:seed=0,n=8")
    assert [t.tests.spec for t in again] == [t.tests.spec for t in train]
    assert load_benchmark(f"{suite}:seed=1,n=2,difficulty=2")[0].metadata["difficulty"] == 2


def test_bad_suite_options_name_the_option():
    with pytest.raises(UnknownBenchmark, match="bad option 'levels=2'"):
        load_benchmark("sql:levels=2")
    with pytest.raises(UnknownBenchmark, match="difficulty must be one of"):
        load_benchmark("sql:difficulty=7")


@pytest.mark.parametrize("suite", ["sql", "optimize", "verilog"])
def test_tasks_validate_passes_on_the_suite(suite, capsys):
    if suite == "verilog":
        needs_iverilog()
    name = f"{suite}:split=test,n=2"
    assert main(["tasks", "validate", name]) == 0
    assert f"{name}: 6/6 reference solutions pass; 0 known defect(s), 0 new failure(s)" in (
        capsys.readouterr().out
    )


@pytest.mark.slow  # a dozen matplotlib runs
def test_tasks_validate_passes_on_the_chart_suite(capsys):
    assert main(["tasks", "validate", "chart:split=test,n=1"]) == 0
    assert "3/3 reference solutions pass" in capsys.readouterr().out


def test_validate_catches_a_wrong_solution_scoring_the_maximum(sandbox):
    """A task whose wrong solution is right after all (or a verifier that cannot tell): the
    check that wrong solutions score below the reference must fail."""
    task = load_benchmark("sql:n=1,difficulty=1")[0]
    assert isinstance(task.tests, VerifierTests)
    assert verifier_failures([task], sandbox) == []
    fooled = dataclasses.replace(task, tests=dataclasses.replace(task.tests, wrong=task.reference))
    (failure,) = verifier_failures([fooled], sandbox)
    assert failure.task_id == task.id and "not below the reference" in failure.message


def test_tasks_show_prints_a_suite_task(capsys):
    assert main(["tasks", "show", "optimize/test/2/0"]) == 0
    out = capsys.readouterr().out
    assert "the 'optimize' verifier" in out and "--- reference ---" in out


def test_an_unknown_verifier_is_an_error_naming_the_task(tmp_path, capsys):
    task = load_benchmark("sql:n=1,difficulty=1")[0]
    odd = dataclasses.replace(task, tests=dataclasses.replace(task.tests, verifier="no_such"))
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(task_to_dict(odd)) + "\n")
    assert main(["tasks", "validate", f"jsonl:{path}"]) == 2
    err = capsys.readouterr().err
    assert f"task {task.id}: unknown verifier 'no_such'" in err and "module:Class" in err
