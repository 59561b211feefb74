"""Threads: honest programs that use them pass; a thread that outlives its call fails the run.

In assert-style tests a thread of the candidate still running after the call that started it
could act after the harness has put the tests' world back. The harness counts the process's
threads (the kernel's count, which no Python code can bend) after every call into the
candidate and after it loads: another thread still there ends the run with a message. Python
3.11 raises no audit event for a new thread, so the check is what closes the class; no timing
is involved, so the property holds beside CPU hogs (`test_..._under_load`)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from execrl.sandbox import Job, Limits, Verdict
from execrl.tasks import AssertTests, StdioCase, StdioTests
from sandbox_helpers import assert_job, run_attack

SETUP = "def check(candidate):\n    assert candidate(3) == 6\n    assert candidate(4) == 8\n"

HONEST = {
    "joined_threads": (
        "import threading\n"
        "def f(x):\n    out = []\n"
        "    ts = [threading.Thread(target=out.append, args=(x,)) for _ in range(2)]\n"
        "    for t in ts:\n        t.start()\n"
        "    for t in ts:\n        t.join()\n"
        "    return sum(out)\n"
    ),
    "thread_pool": (
        "from concurrent.futures import ThreadPoolExecutor\n"
        "def f(x):\n    with ThreadPoolExecutor(max_workers=3) as pool:\n"
        "        return sum(pool.map(lambda v: v, [x, x]))\n"
    ),
    "joined_at_load": (
        "import threading\nres = []\nt = threading.Thread(target=res.append, args=(2,))\n"
        "t.start()\nt.join()\n"
        "def f(x):\n    return x * res[0]\n"
    ),
}


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_threads_pass(sandbox, name):
    r = sandbox.run(assert_job(HONEST[name], "check(candidate)", SETUP))
    assert r.passed, (r.verdict, r.message, r.stderr)


COMPETITIVE = (
    "import sys, threading\n"
    "def main():\n    n = int(sys.stdin.readline())\n    print(n * 2)\n"
    "sys.setrecursionlimit(1 << 16)\nthreading.stack_size(1 << 26)\n"
    "threading.Thread(target=main).start()\n"
)


def test_the_competitive_programming_thread_idiom_passes(sandbox):
    tests = StdioTests((StdioCase("21\n", "42\n"), StdioCase("5\n", "10\n")))
    r = sandbox.run(Job(COMPETITIVE, tests))
    assert r.passed, (r.verdict, r.message, r.stderr)
    wrong = COMPETITIVE.replace("n * 2", "n * 3")
    assert sandbox.run(Job(wrong, tests)).verdict is Verdict.WRONG_ANSWER


# Each is wrong; the thread it leaves running makes the tests' `math.isclose` say yes.
OUTLIVES = {
    "from_the_call": (
        "import math, threading, time\n"
        "def spin():\n    while True:\n        math.isclose = lambda *a, **k: True\n"
        "        time.sleep(0)\n"
        "def f(x):\n    threading.Thread(target=spin, daemon=True).start()\n    return 0.0\n"
    ),
    "from_the_load": (
        "import math, threading, time\n"
        "def spin():\n    while True:\n        math.isclose = lambda *a, **k: True\n"
        "        time.sleep(0)\n"
        "threading.Thread(target=spin, daemon=True).start()\n"
        "def f(x):\n    return 0.0\n"
    ),
    "raw_thread_waiting": (
        "import math, _thread, time\n"
        "def later():\n    time.sleep(0.05)\n    math.isclose = lambda *a, **k: True\n"
        "def f(x):\n    _thread.start_new_thread(later, ())\n    return 0.0\n"
    ),
}
USES_MATH_LATER = (
    "import math\ndef check(candidate):\n    v = candidate(1)\n"
    "    t = __import__('time').monotonic()\n"
    "    while __import__('time').monotonic() < t + 0.3:\n        pass\n"
    "    assert math.isclose(v, 0.5)\n"
)


def _outliving_run(sandbox, name: str, processes: bool):
    job = assert_job(OUTLIVES[name], "check(candidate)", USES_MATH_LATER, wall_s=5.0)
    return run_attack(sandbox, job, threads=processes)


@pytest.mark.parametrize("processes", [True, False], ids=["allow_threads", "default"])
@pytest.mark.parametrize("name", sorted(OUTLIVES))
def test_a_thread_that_outlives_its_call_fails_the_run(sandbox, name, processes):
    r = _outliving_run(sandbox, name, processes)
    assert r.verdict is Verdict.RUNTIME_ERROR, (r.verdict, r.message)
    assert "outlived" in r.message, r.message


@pytest.mark.slow
def test_threads_hold_under_load(sandbox):
    """Four CPU-spinning processes beside the pool: every outliving thread still fails its run
    and every honest threaded program still passes, over many runs."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(4)]
    try:
        time.sleep(0.5)
        for round_ in range(20):
            for name in OUTLIVES:
                r = _outliving_run(sandbox, name, processes=round_ % 2 == 0)
                assert r.verdict is Verdict.RUNTIME_ERROR, (name, r.verdict, r.message)
            for name, program in HONEST.items():
                r = sandbox.run(assert_job(program, "check(candidate)", SETUP, wall_s=10.0))
                assert r.passed, (name, r.verdict, r.message)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert os.getloadavg()[0] > 0


def test_processes_still_need_allow_threads(sandbox):
    """Threads are on for every Python run; processes are not, unless the job allows them."""
    for program in (
        "import os\nos.fork()\n",
        "import subprocess\nsubprocess.run(['true'])\n",
        "import os\nos.system('true')\n",
    ):
        r = run_attack(sandbox, assert_job(program, "check(candidate)", SETUP), threads=False)
        assert r.verdict is Verdict.RUNTIME_ERROR, (program, r.verdict)
    forks = (
        "import os\nif os.fork() == 0:\n    os._exit(0)\nos.wait()\ndef f(x):\n    return 2 * x\n"
    )
    job = Job(forks, AssertTests(SETUP, ("check(candidate)",)), "f", allow_threads=True)
    assert sandbox.run(job).passed
    assert Limits().processes > 1


def test_a_thread_started_by_a_signal_handler_after_the_call_fails_the_run(sandbox):
    """The candidate's timer fires as its call returns, and its handler starts the thread: the
    handlers are undone before the harness counts the threads, so the thread is either counted
    or never started. Several delays, to land on either side of the return."""
    for delay in (1e-6, 1e-5, 5e-5, 2e-4, 1e-3):
        program = (
            "import math, signal, threading, time\n"
            "def spin():\n    time.sleep(0.01)\n    math.isclose = lambda *a, **k: True\n"
            "def handler(*a):\n    threading.Thread(target=spin, daemon=True).start()\n"
            f"def f(x):\n    signal.signal(signal.SIGALRM, handler)\n"
            f"    signal.setitimer(signal.ITIMER_REAL, {delay!r})\n    return 0.0\n"
        )
        job = assert_job(program, "check(candidate)", USES_MATH_LATER, wall_s=5.0)
        r = run_attack(sandbox, job, threads=False)
        assert r.verdict in (Verdict.RUNTIME_ERROR, Verdict.WRONG_ANSWER), (delay, r.verdict)
