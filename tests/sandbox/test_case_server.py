"""The case server (`sandbox/run/cases.py`): a stdin/stdout sample's cases forked from a process
that prepared the program once, each still a fresh run, with the verdicts of the cases forked
by the worker (`SandboxConfig.case_server=False`, the code before it)."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
from tests.sandbox.test_stdio_scale import echo_unless

from execrl.sandbox import Job, Limits, Sandbox, Verdict
from execrl.sandbox.run import cases
from execrl.tasks.schema import StdioCase, StdioTests

N = 12
ECHO = StdioTests(tuple(StdioCase(f"{i}\n", f"{i}\n") for i in range(N)))
LIMITS = Limits(wall_s=5, test_wall_s=1.0)

PROGRAMS = {
    "right": "print(input())",
    "wrong": "print(int(input()) + 1)",
    "crash": echo_unless(7, "raise ValueError('seven')"),
    "exit_status": echo_unless(4, "raise SystemExit(3)"),
    "timeout": echo_unless(9, "while True: pass"),
    "syntax": "print(input()",
    "memory": echo_unless(3, "x = bytearray(3 << 30)"),
    "output": echo_unless(5, "print('y' * (1 << 20))"),
    "forges": echo_unless(2, "__import__('os').write(3, b'0' * 32 + b' 7 {}\\n')"),
    # In the worker's own pid namespace there may be nothing it may signal: ESRCH, not a crash.
    "kills_everything": echo_unless(
        6,
        "import contextlib, os, signal\n"
        "    with contextlib.suppress(ProcessLookupError): os.kill(-1, signal.SIGKILL)",
    ),
}


@pytest.fixture(scope="module")
def pools():
    with Sandbox(workers=1) as served, Sandbox(workers=1, case_server=False) as forked:
        yield served, forked


def _grade(result):
    return (
        result.verdict,
        result.message,
        result.line,
        result.tampering,
        [(o.index, o.verdict, o.exception, o.message, o.line) for o in result.tests],
    )


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_case_server_gives_the_verdicts_of_cases_forked_by_the_worker(pools, name):
    served, forked = pools
    job = Job(PROGRAMS[name], ECHO, limits=LIMITS)
    assert _grade(served.run(job)) == _grade(forked.run(job))


def test_a_case_cannot_remember_an_earlier_case_of_its_sample(pools):
    # Whatever case k leaves where case k+1 could look (a file in its directory or in /tmp, the
    # environment, an attribute on a module, a module of its own in sys.modules, a builtin, a
    # limit it raised), case k+1 prints "remembered" and fails: each case starts from the
    # state the program was prepared in, never from the state an earlier case left.
    program = (
        "import builtins, json, os, sys\n"
        "seen = [os.path.exists('mark'), os.path.exists('/tmp/mark'), 'MARK' in os.environ,\n"
        "        hasattr(json, 'mark'), 'execrl_mark' in sys.modules,\n"
        "        hasattr(builtins, 'execrl_mark'), sys.getrecursionlimit() == 4321]\n"
        "open('mark', 'w').write('x')\n"
        "try:\n    open('/tmp/mark', 'w').write('x')\nexcept OSError:\n    pass\n"
        "os.environ['MARK'] = '1'\njson.mark = 1\nsys.modules['execrl_mark'] = json\n"
        "sys.setrecursionlimit(4321)\n"
        "try:\n    builtins.execrl_mark = 1\nexcept Exception:\n    pass\n"
        "print('remembered %s' % seen if any(seen) else input())\n"
    )
    served, _ = pools
    result = served.run(Job(program, ECHO, limits=LIMITS))
    assert result.verdict is Verdict.PASSED, result.message


def test_a_case_cannot_stop_or_kill_its_case_server(pools):
    # The server keeps the worker's uid; the runs have the run uid. A run that could stop the
    # server would hold its sample until the worker gave up on the server (`cases.ANSWER_S`);
    # one that could kill it would leave its sample's other cases to the slow path.
    program = (
        "import os, signal\n"
        "for sig in (signal.SIGSTOP, signal.SIGKILL):\n"
        "    try:\n        os.kill(os.getppid(), sig)\n"
        "    except OSError:\n        pass\n"
    )
    served, _ = pools
    started = time.monotonic()
    result, seen = _during_a_slow_sample(served, lambda w: _children(w), program + SLOW)
    assert result.verdict is Verdict.PASSED, result.message
    assert time.monotonic() - started < cases.ANSWER_S / 2
    assert len({pid for children in seen for pid in children}) == 1  # one server throughout


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return [int(p) for p in fh.read().split()]
    except OSError:
        return []


SLOW = "import time\ntime.sleep(0.3)\nprint(input())"


def _during_a_slow_sample(sandbox: Sandbox, then, program: str = SLOW, limits=LIMITS, n=6):
    """Run a sample whose cases each sleep; call `then(worker pid)` every 50 ms while it runs
    (until it returns something true). Returns the result and what `then` returned each time."""
    tests = StdioTests(tuple(StdioCase(f"{i}\n", f"{i}\n") for i in range(n)))
    job = Job(program, tests, limits=limits)
    box: dict[str, object] = {}
    thread = threading.Thread(target=lambda: box.update(result=sandbox.run(job)))
    thread.start()
    seen = []
    while thread.is_alive() and not (seen and seen[-1] is True):
        time.sleep(0.05)
        seen.append(then(sandbox.worker_pids()[0]))
    thread.join(60)
    return box["result"], seen


def _tree(worker: int) -> tuple[int, ...]:
    """How many children each child of the worker has."""
    return tuple(len(_children(child)) for child in _children(worker))


def test_the_cases_of_a_sample_are_forked_by_its_case_server(pools):
    served, forked = pools
    result, seen = _during_a_slow_sample(served, _tree)
    assert result.verdict is Verdict.PASSED, result.message
    # the worker's one child is the server, whose one child is the case (or none, between two)
    assert (1,) in seen and set(seen) <= {(), (0,), (1,)}
    result, seen = _during_a_slow_sample(forked, _tree)
    assert result.verdict is Verdict.PASSED, result.message
    assert (0,) in seen and set(seen) <= {(), (0,)}  # the worker forked each case itself


def test_a_program_slow_to_compile_has_each_case_forked_by_the_worker(pools):
    # Compiled once by a server it would not pay its compile inside each case's limit, as it
    # does forked by the worker: over `cases.COMPILE_SHARE` of the limit, the server declines.
    # 150,000 lines compile in about 0.5 s of CPU here (3.2 us a line), 2.5 times the 0.2 s
    # that is 5 % of a 4 s limit.
    served, _ = pools
    program = "x = 1\n" * 150_000 + "print(input())"
    limits = Limits(wall_s=30, test_wall_s=4.0)
    result, seen = _during_a_slow_sample(served, _tree, program, limits, n=2)
    assert result.verdict is Verdict.PASSED, result.message
    assert (1,) not in seen and (0,) in seen


def test_a_sample_whose_case_server_dies_is_graded_without_it():
    with Sandbox(workers=1) as sandbox:

        def kill_server(worker: int) -> bool:
            if _tree(worker) != (1,):  # a case running under the server
                return False
            os.kill(_children(worker)[0], signal.SIGKILL)
            return True

        result, seen = _during_a_slow_sample(sandbox, kill_server)
        assert True in seen
        assert result.verdict is Verdict.PASSED, result.message
        assert sandbox.run(Job("print(input())", ECHO, limits=LIMITS)).passed  # still fit


def test_a_run_config_turns_the_case_server_off(tmp_path):
    from execrl.rl.config.config import ConfigError, load_config

    path = tmp_path / "run.toml"
    path.write_text("[sandbox]\ncase_server = false\n")
    assert load_config(str(path), []).sandbox.case_server is False
    assert load_config(None, []).sandbox.case_server is True
    with pytest.raises(ConfigError, match="sandbox.case_server"):
        load_config(None, ["sandbox.case_server=3"])
