"""Stdin/stdout at scale: `Job.stop_at_first_failure` gives the every-case run's verdict, names
the same first failing case, runs no case after it, and keeps each case in its own run."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from execrl.rewards.scoring.scorer import RewardScorer
from execrl.rl.config.config import ConfigError, load_config
from execrl.sandbox import Job, Limits, SandboxConfig, Verdict, WorkerPool
from execrl.sandbox.first_failure import FIRST_WINDOW, GROWTH
from execrl.sandbox.grading import languages
from execrl.sandbox.grading.grade import SKIPPED
from execrl.sandbox.service.dispatch import Dispatcher
from execrl.tasks.schema import CallTests, StdioCase, StdioTests, Task

N = 40
ECHO = StdioTests(tuple(StdioCase(f"{i}\n", f"{i}\n") for i in range(N)))
LIMITS = Limits(wall_s=5, test_wall_s=0.5)


def echo_unless(k: int, then: str) -> str:
    return f"n = int(input())\nif n == {k}:\n    {then}\nprint(n)\n"


PYTHON = {
    "right": "print(input())",
    "wrong_first": "print(int(input()) + 1)",
    "wrong_late": echo_unless(29, "print(-1); raise SystemExit"),
    "crash": echo_unless(17, "raise ValueError('seventeen')"),
    "exit_status": echo_unless(9, "raise SystemExit(3)"),
    "timeout": echo_unless(33, "while True: pass"),
    "syntax": "print(input()",
    # every case's output is right, but case 5 writes on the harness's channel: the verdict is
    # decided over all the cases (WRONG_ANSWER, tampering), on both paths
    "forges_once": echo_unless(5, "__import__('os').write(3, b'0' * 32 + b' 7 {}\\n')"),
}


def both(sandbox, job: Job):
    fast, full = sandbox.run_many([dataclasses.replace(job, stop_at_first_failure=True), job])
    return fast, full


def assert_same_grade(fast, full) -> None:
    assert (fast.verdict, fast.message, fast.line, fast.tampering) == (
        full.verdict,
        full.message,
        full.line,
        full.tampering,
    )
    assert fast.n_tests == full.n_tests == N
    # the cases the fast path ran are graded exactly as the full run graded them
    strip = [(o.index, o.verdict, o.exception, o.message, o.line) for o in fast.tests]
    assert strip == [
        (o.index, o.verdict, o.exception, o.message, o.line) for o in full.tests[: len(strip)]
    ]


@pytest.mark.parametrize("name", list(PYTHON))
def test_stopping_early_gives_the_every_case_verdict(sandbox, name):
    fast, full = both(sandbox, Job(PYTHON[name], ECHO, limits=LIMITS, id=name))
    assert_same_grade(fast, full)
    assert fast.passed is (name == "right")
    if name == "forges_once":
        assert fast.verdict is Verdict.WRONG_ANSWER and fast.message.startswith("tampering: ")
        assert len(fast.tests) == N
    if name == "right":
        assert len(fast.tests) == N and fast.extra["exit_codes"] == [0] * N
        assert SKIPPED not in fast.extra


@pytest.mark.parametrize(
    "name,first_failing", [("wrong_first", 0), ("wrong_late", 29), ("crash", 17), ("timeout", 33)]
)
def test_the_first_failure_is_named_and_no_later_window_runs(sandbox, name, first_failing):
    fast, full = both(sandbox, Job(PYTHON[name], ECHO, limits=LIMITS, id=name))
    assert fast.message.startswith(f"test {first_failing}: "), fast.message
    assert min(o.index for o in fast.tests if o.verdict is not Verdict.PASSED) == first_failing
    # windows of 1, 4, 16, ... cases: none starts after the window with the failure
    end = window = FIRST_WINDOW
    while end <= first_failing:
        window *= GROWTH
        end += window
    assert len(fast.tests) <= min(end, N)
    # the window with the failure is split between the two workers: its later half is not kept
    assert len(fast.tests) < N
    assert len(full.tests) == N  # the every-case run did run them all
    assert fast.extra[SKIPPED] == N - len(fast.tests) and SKIPPED not in full.extra


def test_the_worker_stops_after_a_case_it_sees_fail(sandbox):
    # A crash needs no expected output: the worker cuts its reply there, mid-window.
    fast, _ = both(sandbox, Job(PYTHON["crash"], ECHO, limits=LIMITS))
    assert max(o.index for o in fast.tests) == 17
    assert fast.extra["exit_codes"][-1] == 1 and len(fast.extra["exit_codes"]) == 18


def test_a_mixed_batch_keeps_its_order(sandbox):
    # Jobs that do not stop early (call tests, a stdio job without the option) run whole,
    # beside the first round's windows; every result comes back in the batch's order.
    add = Job("def add(a, b):\n    return a + b\n", CallTests(((1, 2), (3, 4)), (3, 7)), "add")
    stop = dict(limits=LIMITS, stop_at_first_failure=True)
    jobs = [
        add,
        Job(PYTHON["wrong_first"], ECHO, **stop),
        Job(PYTHON["right"], ECHO, limits=LIMITS),
        Job(PYTHON["right"], ECHO, **stop),
        Job(PYTHON["crash"], ECHO, **stop),
    ]
    seen = []
    results = sandbox.run_many(jobs, progress=seen.append)
    assert [r.verdict for r in results] == [
        Verdict.PASSED,
        Verdict.WRONG_ANSWER,
        Verdict.PASSED,
        Verdict.PASSED,
        Verdict.RUNTIME_ERROR,
    ]
    assert [r.n_tests for r in results] == [2, N, N, N, N] and sum(seen) == len(jobs)


def test_a_server_backend_stops_where_the_worker_sees_the_failure():
    # The Dispatcher (the HTTP server's backend) sends each job whole: the worker's own stop
    # applies there, the parent's windows do not.
    job = Job(PYTHON["crash"], ECHO, limits=LIMITS, stop_at_first_failure=True)
    backend = Dispatcher(WorkerPool(workers=1))
    try:
        fast = backend.submit(job).result(timeout=60)
    finally:
        backend.close()
    assert fast.verdict is Verdict.RUNTIME_ERROR
    assert fast.message.startswith("test 17: ") and len(fast.tests) == 18
    assert fast.extra[SKIPPED] == N - 18


def test_each_case_still_runs_alone(sandbox):
    # A case that sees anything an earlier case left (a file in its directory or in /tmp, an
    # environment variable, a module attribute) prints "leak" and fails.
    program = (
        "import os, sys, json\n"
        "seen = os.path.exists('mark') or os.path.exists('/tmp/mark')"
        " or 'MARK' in os.environ or hasattr(json, 'mark')\n"
        "open('mark', 'w').write('x')\n"
        "try:\n    open('/tmp/mark', 'w').write('x')\nexcept OSError:\n    pass\n"
        "os.environ['MARK'] = '1'\njson.mark = 1\n"
        "print('leak' if seen else input())\n"
    )
    fast, full = both(sandbox, Job(program, ECHO, limits=LIMITS))
    assert fast.verdict is Verdict.PASSED, fast.message
    assert_same_grade(fast, full)


def test_a_long_passing_sample_is_split_across_workers_in_order(sandbox):
    # One sample, so each window is split among the workers; a wrong answer in the second
    # piece of a window and another in the first piece of the next window: the first is named.
    tests = StdioTests(tuple(StdioCase(f"{i}\n", f"{i}\n") for i in range(120)))
    program = "n = int(input())\nprint(-1 if n in (70, 100) else n)\n"
    job = Job(program, tests, limits=LIMITS)
    fast = sandbox.run(dataclasses.replace(job, stop_at_first_failure=True))
    full = sandbox.run(job)
    assert fast.message == full.message and full.message.startswith("test 70: ")
    assert len(fast.tests) < len(tests)


def test_compiled_programs_stop_early_and_compile_once(sandbox):
    if languages.missing_tools("c"):
        pytest.skip("no C compiler")
    wrong = (
        '#include <stdio.h>\nint main(){int n;scanf("%d",&n);'
        'printf("%d\\n", n == 21 ? -1 : n);return 0;}'
    )
    fast, full = both(sandbox, Job(wrong, ECHO, limits=LIMITS, language="c"))
    assert_same_grade(fast, full)
    assert fast.message.startswith("test 21: ")
    assert fast.extra["compile"]["ok"]
    broken = Job("int main({", ECHO, limits=LIMITS, language="c")
    fast, full = both(sandbox, broken)
    assert_same_grade(fast, full)
    assert fast.verdict is Verdict.SYNTAX_ERROR and len(fast.tests) == 1


def test_the_throughput_script_checks_both_paths_agree():
    script = Path(__file__).parents[2] / "benchmarks" / "stdio_throughput.py"
    args = ["--cases", "12", "--samples", "2", "--rounds", "1", "--workers", "2"]
    done = subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["execrl_today_cases_per_s"] > 0 and summary["speedup_over_today"] > 0


def test_the_throughput_script_survives_a_round_too_short_to_measure_cpu():
    # CPU time is counted in clock ticks; a short round on an idle machine read 0 ms and the
    # script divided by it (CI, stop 25). A zero reading gives no CPU ratio, not a crash.
    script = Path(__file__).parents[2] / "benchmarks" / "stdio_throughput.py"
    spec = importlib.util.spec_from_file_location("stdio_throughput", script)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up by name
    spec.loader.exec_module(module)
    measured = module.Measured
    idle, busy = measured(10.0, 0.0, [True], ["ok"]), measured(5.0, 2.0, [True], ["ok"])
    assert module.cpu_ratio(busy, idle) is None and module.cpu_ratio(idle, busy) is None
    assert module.cpu_ratio(busy, measured(10.0, 0.5, [True], ["ok"])) == 4.0


def test_a_pass_fail_training_config_stops_at_the_first_failure(sandbox, tmp_path):
    path = tmp_path / "run.toml"
    path.write_text('[rl]\nreward = "pass"\n\n[reward]\nstop_at_first_failure = true\n')
    config = load_config(path).reward
    assert config.stop_at_first_failure
    task = Task("echo", "Echo the number.", ECHO)
    right, wrong = (f"```python\n{PYTHON[name]}\n```" for name in ("right", "wrong_first"))
    box = SandboxConfig(limits=LIMITS)
    with RewardScorer(config, sandbox=sandbox, sandbox_config=box) as scorer:
        scored = scorer.score_samples([task, task], [right, wrong])
    assert [s.reward.score for s in scored] == [1.0, 0.0]
    stopped = scored[1].sample.result
    assert stopped.message.startswith("test 0: ") and stopped.extra[SKIPPED] == N - 1
    # the cases skipped after the failure are not "tests the program cut short"
    assert all(not s.reward.flags for s in scored), [s.reward.flags for s in scored]


@pytest.mark.parametrize(
    "toml,needs",
    [
        ("[reward]\nstop_at_first_failure = true\n", "leaf reads every test's outcome"),
        (
            '[rl]\nreward = "pass"\n\n[reward]\nstop_at_first_failure = true\nrun_visible = true\n',
            "set reward.hacks.gap above 1",
        ),
    ],
)
def test_stopping_early_is_refused_where_the_reward_reads_every_case(tmp_path, toml, needs):
    # The default training tree is pass_fraction, which counts every case's outcome.
    path = tmp_path / "run.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError, match="reward.stop_at_first_failure") as caught:
        load_config(path)
    assert needs in str(caught.value)
