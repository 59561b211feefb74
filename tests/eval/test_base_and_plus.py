"""EvalPlus benchmarks: base and plus tests run as separate jobs, reported apart and together."""

from __future__ import annotations

import pytest

from execrl.eval.evaluate import evaluate, result_record, summarize
from execrl.eval.samples import Sample
from execrl.sandbox.reference_runner import sandbox_runner
from execrl.tasks import load_benchmark
from execrl.tasks.schema import CallTests, Task, TimeLimit

TASK = Task(
    id="P/0",
    prompt="def double(x):\n",
    entry_point="double",
    tests=CallTests(inputs=((1,), (2,), (50,), (70,)), expected=(2, 4, 100, 140)),
    base_tests=CallTests(inputs=((1,), (2,)), expected=(2, 4)),
    time_limits={
        "base": TimeLimit(2.0, 1.0),
        "plus": TimeLimit(2.0, 1.0),
        "tests": TimeLimit(4.0, 1.0),
    },
)
RIGHT = "def double(x):\n    return 2 * x\n"
SMALL_ONLY = "def double(x):\n    return 2 * x if x < 10 else 0\n"  # passes base, fails plus
WRONG = "def double(x):\n    return x\n"


def _sample(code: str, i: int) -> Sample:
    return Sample("P/0", code, f"samples.jsonl:{i}", {"task_id": "P/0", "solution": code})


def test_base_and_plus_are_separate_verdicts_and_passed_needs_both(sandbox):
    samples = [_sample(c, i) for i, c in enumerate([RIGHT, SMALL_ONLY, WRONG, SMALL_ONLY])]
    results = evaluate(samples, [TASK], "solution", sandbox)
    records = [result_record(r) for r in results]
    assert [(r["base_passed"], r["plus_passed"], r["passed"]) for r in records] == [
        (True, True, True), (True, False, False), (False, False, False), (True, False, False)
    ]  # fmt: skip
    assert records[1]["verdict"] == "WRONG_ANSWER" and records[1]["plus_verdict"] == "WRONG_ANSWER"
    # Test detail covers both groups, plus tests numbered after the two base tests.
    assert [t["index"] for t in records[0]["tests"]] == [0, 1, 2, 3]
    assert records[0]["n_tests"] == 4
    summary = summarize("toy+", results, [TASK])
    # 4 samples, base passes 3 of them, both pass 1: pass@1 = 1/4, base_pass@1 = 3/4.
    # pass@2 = 1 - C(3,2)/C(4,2) = 1 - 3/6 = 0.5; base_pass@2 = 1 - C(1,2)/C(4,2) = 1.
    assert summary["pass@1"] == pytest.approx(0.25) and summary["base_pass@1"] == pytest.approx(
        0.75
    )
    assert summary["pass@2"] == pytest.approx(0.5) and summary["base_pass@2"] == pytest.approx(1.0)


def test_other_benchmarks_have_no_group_fields(sandbox):
    plain = Task(id="Q", prompt="", entry_point="double", tests=TASK.tests)
    results = evaluate([Sample("Q", RIGHT, "s:1", {})], [plain], "solution", sandbox)
    assert "base_passed" not in result_record(results[0])
    assert "base_pass@1" not in summarize("q", results, [plain])


def test_mbpp_plus_base_and_plus_like_evalplus(sandbox, tmp_path, monkeypatch):
    from tests.conftest import shared_data_dir

    data = shared_data_dir()
    if data is None:
        pytest.skip("no benchmark data")
    monkeypatch.setenv("EXECRL_CACHE_DIR", str(tmp_path))
    (task,) = load_benchmark(
        "mbpp+", data, ids=["Mbpp/88"], reference_runner=sandbox_runner()
    )  # freq_count; base inputs are short
    hack = "def freq_count(xs):\n    if len(xs) > 13:\n        return {}\n    return {x: xs.count(x) for x in xs}\n"
    results = evaluate(
        [Sample(task.id, code, "s", {}) for code in (task.reference, hack)],
        [task],
        "solution",
        sandbox,
    )
    flags = [(r["base_passed"], r["plus_passed"]) for r in map(result_record, results)]
    assert flags == [(True, True), (True, False)]
