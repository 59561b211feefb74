"""Functional behaviour of the sandbox: verdicts, per-test detail, the three test kinds."""

from __future__ import annotations

import os
import signal
import threading
import time

from execrl.sandbox import Job, Limits, Sandbox, Verdict
from execrl.tasks import AssertTests, CallTests, Compare, StdioCase, StdioTests
from sandbox_helpers import HONEST, assert_job, call_job


def test_honest_program_passes(sandbox):
    r = sandbox.run(assert_job(HONEST))
    assert r.verdict is Verdict.PASSED and r.passed
    assert r.n_tests == 1 and r.n_passed == 1 and r.pass_rate == 1.0
    assert r.wall_s > 0 and r.peak_memory_kb > 0


def test_wrong_answer_names_the_test(sandbox):
    job = Job(
        HONEST,
        AssertTests("", ("assert f(1) == 2", "assert f(2) == 4", "assert f(3) == 4")),
        entry_point="f",
    )
    r = sandbox.run(job)
    assert r.verdict is Verdict.WRONG_ANSWER
    assert [t.verdict for t in r.tests] == [Verdict.PASSED, Verdict.WRONG_ANSWER, Verdict.PASSED]
    assert r.tests[1].exception == "AssertionError"
    assert r.n_passed == 2 and abs(r.pass_rate - 2 / 3) < 1e-12


def test_runtime_error_reports_the_candidate_line(sandbox):
    program = "def f(x):\n    y = x + 1\n    return y / 0\n"
    r = sandbox.run(assert_job(program))
    assert r.verdict is Verdict.RUNTIME_ERROR
    assert r.tests[0].exception == "ZeroDivisionError"
    assert r.tests[0].line == 3


def test_syntax_error(sandbox):
    r = sandbox.run(assert_job("def f(x):\n    return (\n"))
    assert r.verdict is Verdict.SYNTAX_ERROR
    assert "line" in r.message and r.line == 2
    crash = sandbox.run(assert_job("x = 1\nraise KeyError(x)\n"))
    assert crash.verdict is Verdict.RUNTIME_ERROR and crash.line == 2


def test_missing_entry_point(sandbox):
    r = sandbox.run(assert_job("def g(x):\n    return x\n"))
    assert r.verdict is Verdict.RUNTIME_ERROR and "does not define 'f'" in r.message


def test_call_tests_compare_in_the_parent(sandbox):
    program = "def f(a, b):\n    return sorted(a)[:b]\n"
    job = call_job(program, [([3, 1, 2], 2), ([5, 4], 1), ([], 0)], [[1, 2], [4], [1]])
    r = sandbox.run(job)
    assert [t.verdict for t in r.tests] == [Verdict.PASSED, Verdict.PASSED, Verdict.WRONG_ANSWER]
    assert "expected [1], got []" in r.tests[2].message


def test_call_tests_float_tolerance_and_unordered(sandbox):
    program = "def f(x):\n    return [x / 3, 1.0]\n"
    strict = Job(program, CallTests(((1,),), ([0.3333, 1.0],)), entry_point="f")
    loose = Job(program, CallTests(((1,),), ([0.3333, 1.0],), Compare(atol=1e-3)), entry_point="f")
    unordered = Job(
        program,
        CallTests(((1,),), ([1.0, 0.3333],), Compare(atol=1e-3, unordered=True)),
        entry_point="f",
    )
    strict_r, loose_r, unordered_r = sandbox.run_many([strict, loose, unordered])
    assert strict_r.verdict is Verdict.WRONG_ANSWER
    assert loose_r.passed and unordered_r.passed


def test_call_tests_inputs_are_fresh_per_test(sandbox):
    program = "def f(xs):\n    xs.append(0)\n    return len(xs)\n"
    r = sandbox.run(call_job(program, [([1],), ([1],)], [2, 2]))
    assert r.passed


def test_stdio_tests(sandbox):
    program = "n = int(input())\nfor i in range(1, n + 1):\n    a, b = map(int, input().split())\n    print(f'Case #{i}: {a + b}')\n"
    tests = StdioTests(
        (
            StdioCase("2\n1 2\n3 4\n", "Case #1: 3\nCase #2: 7\n"),
            StdioCase("1\n5 5\n", "Case #1: 11\n"),
        )
    )
    r = sandbox.run(Job(program, tests))
    assert [t.verdict for t in r.tests] == [Verdict.PASSED, Verdict.WRONG_ANSWER]
    assert r.verdict is Verdict.WRONG_ANSWER


def test_stdio_float_tolerance_and_exit_codes(sandbox):
    tol = StdioTests((StdioCase("", "0.3333333\n"),), Compare(atol=1e-6))
    assert sandbox.run(Job("print(1/3)\n", tol)).passed
    assert sandbox.run(Job("import sys\nprint('0.3333333')\nsys.exit(0)\n", tol)).passed
    r = sandbox.run(Job("import sys\nprint('0.3333333')\nsys.exit(3)\n", tol))
    assert r.verdict is Verdict.RUNTIME_ERROR and "exit status 3" in r.tests[0].message


def test_empty_tests_are_an_error_never_a_pass():
    import pytest

    with pytest.raises(ValueError, match="tests are empty"):
        Job(HONEST, AssertTests("", ()), entry_point="f")
    with pytest.raises(ValueError, match="expected values"):
        Job(HONEST, CallTests(((1,),), ()), entry_point="f")


def test_per_test_timeout(sandbox):
    program = "import time\ndef f(x):\n    if x == 2:\n        time.sleep(5)\n    return x + 1\n"
    job = Job(
        program,
        AssertTests("", ("assert f(1) == 2", "assert f(2) == 3")),
        entry_point="f",
        limits=Limits(wall_s=10, test_wall_s=0.5),
    )
    t0 = time.monotonic()
    r = sandbox.run(job)
    assert r.verdict is Verdict.TIMEOUT and time.monotonic() - t0 < 3
    assert [t.verdict for t in r.tests] == [Verdict.PASSED, Verdict.TIMEOUT]


def test_joined_threads_pass_with_or_without_allow_threads(sandbox):
    program = "import threading\nout = []\nt = threading.Thread(target=lambda: out.append(1))\nt.start()\nt.join()\ndef f(x):\n    return x + len(out)\n"
    assert sandbox.run(assert_job(program)).passed
    allowed = Job(
        program, AssertTests("", ("assert f(1) == 2",)), entry_point="f", allow_threads=True
    )
    assert sandbox.run(allowed).passed


def test_namedtuple_and_stdlib_imports_still_work(sandbox):
    program = "import collections, fractions, socket, enum\nP = collections.namedtuple('P', 'x y')\nclass C(enum.Enum):\n    A = 1\ndef f(x):\n    return P(x, 1).x + C.A.value\n"
    assert sandbox.run(assert_job(program)).passed


def test_killed_worker_is_a_sandbox_error_then_replaced():
    with Sandbox(workers=1, max_retries=0) as sb:
        pid = sb.worker_pids()[0]
        program = "import time\ndef f(x):\n    time.sleep(2)\n    return x + 1\n"
        timer = threading.Timer(0.5, os.kill, (pid, signal.SIGKILL))
        timer.start()
        r = sb.run(assert_job(program, wall_s=5))
        timer.join()
        assert r.verdict is Verdict.SANDBOX_ERROR
        assert r.sandbox_error_cause == "worker_died" and not r.possible_hack
        assert sb.worker_pids()[0] != pid
        assert sb.run(assert_job(HONEST)).passed
        assert sb.stats.worker_restarts == 1 and sb.stats.sandbox_errors == 1


def test_killed_worker_is_retried():
    with Sandbox(workers=1, max_retries=1) as sb:
        pid = sb.worker_pids()[0]
        program = "import time\ndef f(x):\n    time.sleep(1)\n    return x + 1\n"
        timer = threading.Timer(0.3, os.kill, (pid, signal.SIGKILL))
        timer.start()
        r = sb.run(assert_job(program, wall_s=5))
        timer.join()
        assert r.passed and r.attempts == 2


def test_results_keep_the_order_of_jobs(sandbox):
    jobs = [assert_job(f"def f(x):\n    return x + {k}\n") for k in (1, 0, 1, 2, 1)]
    assert [r.passed for r in sandbox.run_many(jobs)] == [True, False, True, False, True]


def test_missing_layers_are_an_error_unless_opted_out(monkeypatch):
    import pytest

    from execrl.sandbox import SandboxUnavailable
    from execrl.sandbox.confine import isolation

    real = isolation.probe_layers

    def without_network():
        return [
            isolation.LayerStatus(s.name, s.available and s.name != "network", s.detail)
            for s in real()
        ]

    monkeypatch.setattr(isolation, "probe_layers", without_network)
    with pytest.raises(SandboxUnavailable, match="network"):
        Sandbox(workers=1)
    with Sandbox(workers=1, allow_missing_layers=True) as sb:
        assert "network" not in sb.layers
        assert sb.run(assert_job(HONEST)).passed


def test_large_returns_and_long_chatty_runs_are_read_in_time(sandbox):
    from execrl.sandbox import Job, Limits
    from execrl.tasks.schema import CallTests

    # 40 outputs of ~200 KB each: many times the channel pipe's buffer, read while the run goes.
    big = "def f(i):\n    return 'x' * 200_000 + str(i)\n"
    tests = CallTests(
        inputs=tuple((i,) for i in range(40)),
        expected=tuple("x" * 200_000 + str(i) for i in range(40)),
    )
    r = sandbox.run(Job(big, tests, "f", limits=Limits(wall_s=10)))
    assert r.passed, (r.verdict, r.message)
    assert r.wall_s < 5


def test_the_cap_on_returned_values_is_named_as_the_worker_sets_it():
    from execrl.sandbox.grading import grade
    from execrl.sandbox.run import watch

    assert grade.CHANNEL_CAP_MB << 20 == watch.CHANNEL_CAP
