"""HumanEval+ and MBPP+ with EvalPlus semantics, on a sample of tasks (the whole benchmarks
are validated by the slow test in test_validate.py)."""

from __future__ import annotations

import pytest

from execrl.sandbox import Job, Limits, Sandbox
from execrl.sandbox.reference_runner import sandbox_runner
from execrl.tasks import load_benchmark
from execrl.tasks.defects import KNOWN_DEFECTS
from execrl.tasks.errors import TaskDataError
from execrl.tasks.evalplus import mbpp_deserialize_inputs, time_limit
from execrl.tasks.reference_runs import ReferenceRun
from execrl.tasks.schema import AssertTests, CallTests, job_limits

MBPP_IDS = ["Mbpp/2", "Mbpp/88", "Mbpp/124", "Mbpp/558", "Mbpp/581", "Mbpp/737", "Mbpp/793"]
HE_IDS = ["HumanEval/0", "HumanEval/2", "HumanEval/32"]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("EXECRL_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    yield
    mp.undo()


@pytest.fixture(scope="module")
def mbpp(cache):
    from tests.conftest import shared_data_dir

    d = shared_data_dir()
    if d is None:
        pytest.skip("no benchmark data")
    return {
        t.id: t for t in load_benchmark("mbpp+", d, ids=MBPP_IDS, reference_runner=sandbox_runner())
    }


@pytest.fixture(scope="module")
def he(cache):
    from tests.conftest import shared_data_dir

    d = shared_data_dir()
    if d is None:
        pytest.skip("no benchmark data")
    return {
        t.id: t
        for t in load_benchmark("humaneval+", d, ids=HE_IDS, reference_runner=sandbox_runner())
    }


def _run(task, program, group="tests"):
    tests = {"tests": task.tests, "base": task.base_tests, "plus": task.plus_tests}[group]
    job = Job(
        program,
        tests,
        task.entry_point,
        limits=Limits(**job_limits(task, group)),
        strict_returns=task.strict_returns,
    )
    with Sandbox(workers=1) as sb:
        return sb.run_many([job])[0]


def test_inputs_are_converted_back_per_task():
    assert mbpp_deserialize_inputs("Mbpp/2", [[[1, 2], [3]]]) == [[(1, 2), (3,)]]
    assert mbpp_deserialize_inputs("Mbpp/124", [["1.5", "(1+2j)"]]) == [(1.5, 1 + 2j)]
    assert mbpp_deserialize_inputs("Mbpp/115", [[[[1], []]]]) == [[[{1}, {}]]]
    assert mbpp_deserialize_inputs("Mbpp/580", [[[1, [2, 3]]]]) == [((1, (2, 3)),)]
    assert mbpp_deserialize_inputs("Mbpp/3", [[[1]]]) == [[[1]]]


def test_time_limits_follow_evalplus():
    # per input max(1, 4t): [1, 1, 8]; group: min(60, 10) + 1
    assert time_limit((0.01, 0.2, 2.0)) == pytest.approx(type(time_limit((0,)))(11.0, 8.0))
    assert time_limit((20.0, 20.0)).wall_s == 61.0


def test_base_and_plus_are_kept_apart(mbpp, he):
    t = mbpp["Mbpp/2"]
    assert len(t.base_tests) == 3 and len(t.plus_tests) == 108 and len(t.tests) == 111
    assert t.base_tests.inputs[0] == ((3, 4, 5, 6), (5, 7, 4, 10))  # tuples, as EvalPlus makes them
    assert t.tests.compare.oracle == "evalplus_set"
    assert set(t.time_limits) == {"base", "plus", "tests"}
    assert mbpp["Mbpp/793"].plus_tests == CallTests((), (), mbpp["Mbpp/793"].tests.compare)
    assert he["HumanEval/32"].tests.compare.oracle == "evalplus_poly_root"
    assert he["HumanEval/2"].tests.compare.atol == 1e-6


def test_references_pass_and_the_special_oracles_judge_like_evalplus(mbpp, he):
    for task in (*mbpp.values(), *he.values()):
        if task.id in KNOWN_DEFECTS["mbpp+"]:
            assert not _run(task, task.reference).passed
            continue
        r = _run(task, task.reference)
        assert r.passed, (task.id, r.verdict, r.message)
    # Mbpp/2: a set comparison, so another order passes.
    order = "def similar_elements(a, b):\n    return tuple(sorted(set(a) & set(b), reverse=True))\n"
    assert _run(mbpp["Mbpp/2"], order).passed
    # HumanEval/32: a root other than the reference's value (a tighter Newton tolerance) passes.
    root = he["HumanEval/32"].reference.replace("x, tol = 0, 1e-5", "x, tol = 0, 1e-12")
    assert root != he["HumanEval/32"].reference
    assert _run(he["HumanEval/32"], root).passed
    assert not _run(he["HumanEval/32"], "def find_zero(xs):\n    return 12345.0\n").passed
    # Mbpp/737: a re.Match, or True, both pass ("not None"); a wrong answer fails.
    t = mbpp["Mbpp/737"]
    assert isinstance(t.tests, AssertTests) and not t.strict_returns
    assert _run(
        t, "import re\ndef check_str(s):\n    return re.search('^[aeiouAEIOU]', s)\n"
    ).passed
    assert not _run(t, "def check_str(s):\n    return None\n").passed


def test_a_solution_can_pass_base_and_fail_plus(mbpp):
    t = mbpp["Mbpp/88"]  # freq_count: the base inputs are short lists
    hack = "def freq_count(xs):\n    if len(xs) > 13:\n        return {}\n    return {x: xs.count(x) for x in xs}\n"
    assert any(len(a[0]) > 13 for a in t.plus_tests.inputs)
    assert _run(t, hack, "base").passed
    assert not _run(t, hack, "plus").passed


def test_reference_runs_fetch_large_outputs_and_report_failures():
    big = ReferenceRun(
        "big",
        "def f(n):\n    print('noise')\n    return list(range(n)) if type(n) is int else n\n",
        "f",
        ((3,), (60_000,), ((1, 2),)),
    )
    out = sandbox_runner(progress=False)([big])["big"]
    assert out.outputs[0] == [0, 1, 2] and out.outputs[1] == list(range(60_000))
    assert out.outputs[2] == (1, 2) and len(out.seconds) == 3
    huge = ReferenceRun("huge", "def f(n):\n    return [0] * n\n", "f", ((2,), (2_000_001,)))
    out = sandbox_runner(progress=False)([huge])["huge"]
    # no candidate could return two million values through the sandbox either: left out
    assert out.outputs == ([0, 0], None) and list(out.excluded) == [1]
    bad = ReferenceRun("bad", "def f(x):\n    return 1 // x\n", "f", ((1,), (0,)))
    with pytest.raises(
        TaskDataError, match="bad: the reference solution failed on input 1: ZeroDivisionError"
    ):
        sandbox_runner(progress=False)([bad])


def test_ground_truth_is_cached(mbpp, monkeypatch):
    from tests.conftest import shared_data_dir

    def no_runs(runs):
        raise AssertionError(f"recomputed {[r.key for r in runs]}")

    again = load_benchmark("mbpp+", shared_data_dir(), ids=MBPP_IDS, reference_runner=no_runs)
    assert {t.id: t for t in again} == mbpp
