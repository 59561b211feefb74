"""Expected outputs of reference solutions: each input computed once, whatever its output's size.

The pure part (what a run printed, what runs next) by hand; then the sandbox runner, counting
how often each input was computed by reading every run's stdout; then the doors: `execrl
tasks show` on a cold cache, and (slow) `execrl eval-samples --benchmark humaneval+`.
"""

from __future__ import annotations

import collections
import dataclasses
import gzip
import json
import os
import subprocess
import sys
import time

import pytest

import execrl.sandbox.reference_runner as runner_mod
from execrl.sandbox.pool import WorkerPool
from execrl.sandbox.reference_runner import sandbox_runner
from execrl.tasks import reference_runs
from execrl.tasks.errors import TaskDataError
from execrl.tasks.evalplus import Problem, ground_truth
from execrl.tasks.reference_runs import (
    MARK,
    Pending,
    ReferenceOutputs,
    ReferenceRun,
    finish,
    follow_up,
    record,
)
from execrl.tasks.values import from_json, loads, to_json

EXECRL = [sys.executable, "-m", "execrl.cli"]


def _line(i: int, text: str, dt: float = 0.5) -> str:
    return f"{MARK}{i}\t{dt!r}\t{len(text)}\t{text}\n"


def _pending(n: int) -> Pending:
    return Pending(
        ReferenceRun("t", "def f(x):\n    return x\n", "f", tuple((k,) for k in range(n)))
    )


# -- the pure part -----------------------------------------------------------------------------


def test_a_run_that_stopped_at_its_budget_sends_only_the_inputs_it_never_started():
    p = _pending(4)
    # inputs 0 and 1 reported, 2 cut off mid-line (not counted), 3 never started
    stdout = "noise\n" + _line(0, "5") + _line(1, '{"$t":[1,2]}') + f"{MARK}2\t0.1\t9\t[1,2"
    unreported = record(p, stdout, [0, 1, 2, 3])
    assert unreported == [2, 3]
    assert p.outputs == {0: 5, 1: (1, 2)} and p.seconds == {0: 0.5, 1: 0.5}
    assert follow_up(p, [0, 1, 2, 3], unreported, "") == [[2, 3]]
    assert not p.errors and not p.excluded


def test_a_run_that_died_retries_its_culprit_alone_then_leaves_it_out():
    p = _pending(4)
    unreported = record(p, _line(0, "0"), [0, 1, 2, 3])
    # The driver runs inputs in order, so the run died on 1: 1 alone, then 2 and 3 together.
    assert follow_up(p, [0, 1, 2, 3], unreported, "TIMEOUT wall") == [[1], [2, 3]]
    # 1 alone dies again: a limit, so it is left out, with the reason.
    assert follow_up(p, [1], record(p, "", [1]), "MEMORY_LIMIT over 4096 MB") == []
    assert p.excluded == {1: "the reference hit a sandbox limit: MEMORY_LIMIT over 4096 MB"}
    assert not p.errors


def test_a_run_that_crashed_on_its_first_input_is_an_error_not_an_exclusion():
    p = _pending(2)
    assert follow_up(p, [0, 1], record(p, "", [0, 1]), "RUNTIME_ERROR exit status 3") == []
    assert p.errors == ["t: the reference did not run on input 0: RUNTIME_ERROR exit status 3"]
    assert not p.excluded


def test_a_run_that_ended_having_reported_nothing_is_an_error_not_a_loop():
    p = _pending(2)
    assert follow_up(p, [0, 1], record(p, "", [0, 1]), "") == []
    assert p.errors == ["t: the reference printed no output for input 0"]


def test_the_driver_s_error_lines_exclude_or_fail_the_input():
    p = _pending(3)
    stdout = (
        f"{MARK}0\tERR\tOverflowError: OutputTooLarge\n"
        f"{MARK}1\tERR\tMemoryError: \n"
        f"{MARK}2\tERR\tZeroDivisionError: division by zero\n"
    )
    assert record(p, stdout, [0, 1, 2]) == []
    assert sorted(p.excluded) == [0, 1] and "2,000,000 values" in p.excluded[0]
    assert p.errors == [
        "t: the reference solution failed on input 2: ZeroDivisionError: division by zero"
    ]


def test_a_line_whose_length_does_not_match_or_that_was_not_asked_for_is_refused():
    with pytest.raises(TaskDataError, match="t: the output of the reference on input 0 was cut"):
        record(_pending(1), f"{MARK}0\t0.1\t3\t[1]]\n", [0])
    with pytest.raises(TaskDataError, match="reported input 1 unasked"):
        record(_pending(2), _line(1, "1"), [0])


def test_finish_refuses_a_lost_output():
    p = _pending(2)
    record(p, _line(0, "[]"), [0, 1])
    with pytest.raises(TaskDataError, match="t: the output of the reference on input 1 was lost"):
        finish(p)
    p.excluded[1] = "why"
    assert finish(p) == ReferenceOutputs(([], None), (0.5, 0.0), {1: "why"}, ("[]", "null"))


DRIVEN = """
import collections

class Liar(dict):
    def items(self):
        return [("a", 1)]

def f(k):
    od = collections.OrderedDict(a=1, b=2)
    od.move_to_end("a")
    return [(1, {2}, b"x", float("nan"), 1j), collections.Counter("aab"), od, Liar(z=0),
            object(), 2**14000, 2**14000 - 1, list(range(9))][k]
"""


def test_the_driver_s_lines_are_pinned_to_the_byte():
    # the driver encodes with tasks/values.py, shipped as its text; run here as the sandbox runs
    # it (a stdio program that imports nothing of execrl's), its timings left out
    run = ReferenceRun("t", DRIVEN, "f", tuple((k,) for k in range(8)))
    stdin = json.loads(reference_runs.request(run, list(range(8))))
    stdin["max_nodes"] = 9  # list(range(9)) is 10 values
    program = f"__execrl_source = {DRIVEN!r}\n" + reference_runs.DRIVER
    out = subprocess.run([sys.executable, "-I", "-c", program], input=json.dumps(stdin),
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    lines = [line.split("\t") for line in out.removeprefix(MARK).split(f"\n{MARK}")]
    texts = [
        '{"$t":[1,{"$s":[2]},{"$b":"eA=="},{"$f":"nan"},{"$c":[0.0,1.0]}]}',
        '{"$d":[["a",2],["b",1]]}',  # a dict subclass as its own items say, as EvalPlus compares
        '{"$d":[["b",2],["a",1]]}',
        '{"$d":[["a",1]]}',
        "TypeError: returned a value of type 'object', which is not plain data",
        "OverflowError: OutputTooLarge",  # over 14,000 bits
        str(2**14000 - 1),  # 4,215 digits, but not over 14,000 bits
        "OverflowError: OutputTooLarge\n",  # over max_nodes
    ]
    assert [p[1:] if p[1] == "ERR" else p[2:] for p in lines] == [
        ["ERR", x] if x.startswith(("TypeError", "OverflowError")) else [str(len(x)), x]
        for x in texts
    ]


def test_loads_reads_exactly_what_from_json_reads():
    values = [
        [1, 2.5, -0.0, True, None, "s"],
        (1, (2, [3])),
        {(1, 2): {3}, "a": frozenset({1}), 4: [b"\x00x"]},
        [float("inf"), float("-inf"), 1 + 2j],
        {},
        [(), [()]],
    ]
    for v in values:
        text = json.dumps(to_json(v))
        assert loads(text) == from_json(json.loads(text)) == v
        assert repr(loads(text)) == repr(from_json(json.loads(text)))
    for bad in ('{"$t": [1], "$s": [2]}', '{"$q": 1}'):
        with pytest.raises(ValueError):
            loads(bad)


def test_the_cache_reads_back_the_same_outputs_whether_or_not_the_runner_kept_the_texts(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("EXECRL_CACHE_DIR", str(tmp_path / "cache"))
    outputs = ((1, 2), [1.5, float("inf")], None, {"k": {3}})
    texts = tuple(json.dumps(to_json(o)) for o in outputs)
    for kept in (texts, ()):
        name = f"t{len(kept)}"
        inputs = ((0,), (1,)), ((2,), (3,))
        problem = Problem(name, "humaneval", "", "f", "", *inputs, 0.0, "x", inputs_digest=name)
        gt = ReferenceOutputs(outputs, (0.1, 0.2, 0.0, 0.3), {2: "why"}, kept)
        calls = []

        def runner(runs, on_done=None, gt=gt, calls=calls):
            calls.append([r.key for r in runs])
            on_done(runs[0].key, gt)
            return {runs[0].key: gt}

        assert ground_truth(tmp_path / "d.jsonl.gz", [problem], runner)[name] == gt
        again = ground_truth(tmp_path / "d.jsonl.gz", [problem], None)[name]  # from the cache
        assert (again.outputs, again.seconds, again.excluded) == (
            gt.outputs,
            gt.seconds,
            {2: "why"},
        )
        assert repr(again.outputs) == repr(outputs) and calls == [[name]]


# -- the sandbox runner ------------------------------------------------------------------------


@pytest.fixture
def computed(monkeypatch):
    """(run key, input) -> how many runs computed it, read from every run's whole stdout."""
    counts: collections.Counter[tuple[str, int]] = collections.Counter()

    class Counting(WorkerPool):
        def run_many(self, jobs, progress=None):
            results = super().run_many(jobs, progress)
            for job, r in zip(jobs, results, strict=True):
                for line in r.extra.get("stdout", r.stdout).split("\n")[:-1]:
                    if line.startswith(MARK):
                        counts[(job.id, int(line[len(MARK) :].split("\t", 1)[0]))] += 1
            return results

    monkeypatch.setattr(runner_mod, "WorkerPool", Counting)
    return counts


def test_each_input_is_computed_once_whatever_the_size_of_its_output(computed, monkeypatch):
    # 1.3 and 2.7 MB outputs, far over the 64 KiB the sandbox keeps of a run's stdout; a run
    # stops starting inputs after 1 MB, so the three take two runs.
    monkeypatch.setattr(reference_runs, "SOFT_BYTES", 1 << 20, raising=False)
    updates = []

    class Bar:
        def update(self, n):
            updates.append(n)

        def close(self):
            pass

    monkeypatch.setattr(runner_mod, "progress_bar", lambda total, enabled: Bar())
    big = ReferenceRun(
        "big",
        "def f(n):\n    print('noise')\n    return list(range(n))\n",
        "f",
        ((3,), (200_000,), (400_000,)),
    )
    out = sandbox_runner(progress=False)([big])["big"]
    assert out.outputs == ([0, 1, 2], list(range(200_000)), list(range(400_000)))
    assert len(out.seconds) == 3 and not out.excluded
    assert computed == {("big", 0): 1, ("big", 1): 1, ("big", 2): 1}
    assert sum(updates) == 3 and len(updates) == 2  # the bar counts inputs, as runs end


def test_an_input_whose_run_dies_is_retried_alone_then_left_out(computed, monkeypatch):
    limits = dataclasses.replace(runner_mod.LIMITS, wall_s=1.5, cpu_s=1.5)
    monkeypatch.setattr(runner_mod, "LIMITS", limits)
    slow = ReferenceRun(
        "slow",
        "import time\ndef f(x):\n    if x == 2:\n        time.sleep(60)\n    return x\n",
        "f",
        ((0,), (1,), (2,), (3,)),
    )
    out = sandbox_runner(progress=False)([slow])["slow"]
    assert out.outputs == (0, 1, None, 3)
    assert list(out.excluded) == [2] and "TIMEOUT" in out.excluded[2]
    assert computed == {("slow", 0): 1, ("slow", 1): 1, ("slow", 3): 1}


def test_a_reference_that_fails_is_an_error_and_the_others_are_kept_before_it_is_raised():
    good = ReferenceRun("good", "def f(x):\n    return [x] * 3\n", "f", ((1,), (2,)))
    crash = ReferenceRun("crash", "import os\ndef f(x):\n    os._exit(3)\n", "f", ((1,),))
    bad = ReferenceRun("bad", "def f(x):\n    return 1 // x\n", "f", ((1,), (0,)))
    kept = {}
    with pytest.raises(TaskDataError) as caught:
        sandbox_runner(progress=False)([good, crash, bad], on_done=kept.__setitem__)
    message = str(caught.value)
    assert "bad: the reference solution failed on input 1: ZeroDivisionError" in message
    assert "crash: the reference did not run on input 0: RUNTIME_ERROR" in message
    assert list(kept) == ["good"] and kept["good"].outputs == ([1, 1, 1], [2, 2, 2])


# -- the doors ---------------------------------------------------------------------------------


def test_tasks_show_on_a_cold_cache_computes_a_nine_megabyte_output_once(data_dir, tmp_path):
    # HumanEval/100's references return 9 MB in all: the old runner fetched them again in
    # 59 KB slices, a run each (about 150 runs, 39 s on this machine; now two or three).
    env = dict(os.environ, EXECRL_CACHE_DIR=str(tmp_path))
    argv = ["tasks", "show", "HumanEval/100", "--benchmark", "humaneval+", "--json"]
    argv += ["--data-dir", str(data_dir)]
    out = subprocess.run([*EXECRL, *argv], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr
    tests = json.loads(out.stdout)["tests"]
    inputs, expected = from_json(tests["inputs"]), from_json(tests["expected"])
    assert len(inputs) > 100 and sum(len(e) for e in expected) > 1_000_000
    assert expected == [[n + 2 * i for i in range(n)] for (n,) in inputs]  # make_a_pile
    (cached,) = (tmp_path / "groundtruth").rglob("HumanEval_100-*.json.gz")
    with gzip.open(cached, "rt") as f:
        assert json.loads(f.readline())["excluded"] == {}


@pytest.mark.slow
def test_eval_samples_on_humaneval_plus_with_a_cold_cache_finishes_in_minutes(data_dir, tmp_path):
    path = data_dir / "humanevalplus" / "HumanEvalPlus-v0.1.10.jsonl.gz"
    with gzip.open(path, "rt") as f:
        rows = [json.loads(line) for line in f]
    samples = tmp_path / "samples.jsonl"
    samples.write_text(
        "".join(
            json.dumps({"task_id": r["task_id"], "solution": r["prompt"] + r["canonical_solution"]})
            + "\n"
            for r in rows
        )
    )
    env = dict(os.environ, EXECRL_CACHE_DIR=str(tmp_path / "cache"))
    argv = ["eval-samples", str(samples), "--benchmark", "humaneval+", "--json"]
    argv += ["--data-dir", str(data_dir)]
    t0 = time.monotonic()
    out = subprocess.run([*EXECRL, *argv], capture_output=True, text=True, env=env, timeout=1200)
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["n_tasks"] == 164 and summary["pass@1"] == 1.0, summary
    print(f"eval-samples humaneval+ on a cold cache: {time.monotonic() - t0:.0f} s")
