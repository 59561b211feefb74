"""Attacks from the second red-team pass, one test per class; each made a wrong program PASS (or
the parent crash, or the worker take gigabytes) on the code before its fix."""

from __future__ import annotations

import time

import pytest

from execrl.sandbox import Job, Limits, Sandbox, Verdict
from execrl.sandbox.grading import run_outcome
from execrl.sandbox.grading.grade import grade
from execrl.sandbox.run import protocol
from execrl.tasks import AssertTests
from sandbox_helpers import HONEST, assert_job, call_job, run_attack

# Keeps the real channel, puts a pipe of its own on fd 3, reads the token off the harness's
# next message, forges "ok" results and "done" on the real one, and exits.
CHANNEL_HIJACK = r"""
import os, json
_real = os.dup(3)
_r, _w = os.pipe()
os.dup2(_w, 3)
def f(x):
    line = os.read(_r, 1 << 16).split(b"\n")[0]
    token = line[: line.index(b"{")]
    for i in range(100):
        os.write(_real, token + json.dumps({"t": "result", "i": i, "ok": True}).encode() + b"\n")
    os.write(_real, token + json.dumps({"t": "done", "n": N}).encode() + b"\n")
    os._exit(0)
"""


def test_a_program_that_replaces_the_harness_channel_is_stopped(sandbox):
    r = sandbox.run(assert_job(CHANNEL_HIJACK.replace("N", "1")))
    assert r.verdict is Verdict.RUNTIME_ERROR and "channel" in r.message, (r.verdict, r.message)
    r = sandbox.run(call_job(CHANNEL_HIJACK.replace("N", "2"), [(1,), (2,)], [2, 3]))
    assert r.verdict is Verdict.RUNTIME_ERROR and "channel" in r.message, (r.verdict, r.message)
    assert sandbox.run(assert_job(HONEST)).passed


SLOW_WITH_FORGED_STARTS = r"""
import os, time
def f(x):
    t0 = time.monotonic()
    while time.monotonic() - t0 < 3.0:
        os.write(3, b'{"t":"start","i":0}\n')
        time.sleep(0.1)
    return x + 1
"""


def test_forged_start_messages_do_not_extend_the_per_test_limit(sandbox):
    t0 = time.monotonic()
    r = sandbox.run(assert_job(SLOW_WITH_FORGED_STARTS, wall_s=20, test_wall_s=0.5))
    assert r.verdict is Verdict.TIMEOUT, (r.verdict, r.message)
    assert time.monotonic() - t0 < 2.5  # stopped at the per-test limit, not after 3 s


LIAR = """
class Liar(str):
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    __hash__ = str.__hash__
class M:
    def __str__(self): return Liar("x")
"""
EXCEPTION_SLOTS = {
    # SyntaxError.__str__ returns str(self.msg) as it is: a lying str subclass.
    "syntax_msg": (
        LIAR + "def f(x):\n    e = SyntaxError('plain')\n    e.msg = M()\n    raise e\n",
        "def check(candidate):\n    try:\n        candidate(-1)\n    except Exception as e:\n"
        "        assert str(e) == 'negative input'\n    else:\n        assert False\n",
    ),
    # OSError.__str__ calls repr(filename): candidate code after the restore, patching math.
    "oserror_filename": (
        "import math\nclass Evil:\n    def __repr__(self):\n"
        "        math.isclose = lambda *a, **k: True\n        return 'x'\n"
        "def f(x):\n    if x < 0:\n        e = OSError(2, 'No such file')\n"
        "        e.filename = Evil()\n        raise e\n    return 0.0\n",
        "import math\ndef check(candidate):\n    try:\n        candidate(-1)\n"
        "    except OSError as e:\n        str(e)\n    assert math.isclose(candidate(1), 0.5)\n",
    ),
}


@pytest.mark.parametrize("name", sorted(EXCEPTION_SLOTS))
def test_exception_slots_cannot_carry_the_candidates_objects(sandbox, name):
    program, setup = EXCEPTION_SLOTS[name]
    run_attack(sandbox, Job(program, AssertTests(setup, ("check(candidate)",)), entry_point="f"))


# The kernel sends the signal it was told (F_SETSIG, here a real-time one) when the worker
# drains the full stdout pipe: after the call, while the tests run.
SIGNAL_ON_IO = r"""
import math, os, signal, fcntl
def handler(*a):
    math.isclose = lambda *a, **k: True
def f(x):
    signal.signal(signal.SIGRTMIN, handler)
    fcntl.fcntl(1, fcntl.F_SETOWN, os.getpid())
    fcntl.fcntl(1, 10, signal.SIGRTMIN)  # F_SETSIG
    fcntl.fcntl(1, fcntl.F_SETFL, fcntl.fcntl(1, fcntl.F_GETFL) | os.O_ASYNC)
    os.write(1, b"x" * 65536)
    return 0.0
"""


def test_a_signal_set_to_arrive_on_io_is_undone_after_the_call(sandbox):
    setup = (
        "import math\ndef check(candidate):\n    v = candidate(1)\n"
        "    for _ in range(1000000):\n        pass\n    assert math.isclose(v, 0.5)\n"
    )
    job = Job(SIGNAL_ON_IO, AssertTests(setup, ("check(candidate)",)), entry_point="f")
    for _ in range(3):  # it raced the tests' loop: about 3 runs in 5 passed before the fix
        assert sandbox.run(job).verdict is not Verdict.PASSED


def _peak_rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))


def test_junk_lines_on_the_channel_keep_the_worker_small():
    junk = "import os\ndef f(x):\n    os.write(3, b'x\\n' * (32 << 20))\n    return x + 1\n"
    with Sandbox(workers=1) as sb:
        r = sb.run(assert_job(junk))
        peak = _peak_rss_kb(sb.worker_pids()[0])
    assert r.verdict is not Verdict.PASSED
    # 64 MiB of two-byte lines: split into objects, 32 million of them took over 2 GB.
    assert peak < 400 << 10, peak


DEPENDENCIES = {
    # What datetime.strptime imports from C, patched by plain assignment.
    "strptime_patched": (
        "import _strptime, datetime\n_real = _strptime._strptime_datetime\n"
        "_strptime._strptime_datetime = lambda cls, t, f: _real(cls, t, f).replace(year=1999)\n"
        "def f(s):\n    return 1999\n",
        "import datetime",
        "assert datetime.datetime.strptime('2020', '%Y').year == f('2020')",
    ),
    "strptime_planted": (
        "import sys, types\nfake = types.ModuleType('_strptime')\n"
        "fake._strptime_datetime = lambda cls, text, fmt: cls(1999, 1, 1)\n"
        "sys.modules['_strptime'] = fake\ndef f(s):\n    return 1999\n",
        "import datetime",
        "assert datetime.datetime.strptime('2020', '%Y').year == f('2020')",
    ),
    "json_decoder": (
        "import json.decoder\n"
        "json.decoder.JSONDecoder.decode = lambda self, s, *a, **k: {'ok': True}\n"
        "def f(x):\n    return '{\"ok\": false}'\n",
        "import json",
        "assert json.loads(f(1)) == {'ok': True}",
    ),
    "re_compiler": (
        "import re._compiler as c\n_orig = c.compile\n"
        "c.compile = lambda p, flags=0: _orig('[a-z]+' if p == r'^\\d{3}$' else p, flags)\n"
        "def f(x):\n    return 'abc'\n",
        "import re",
        "assert re.match(r'^\\d{3}$', f(1))",
    ),
}


@pytest.mark.parametrize("name", sorted(DEPENDENCIES))
def test_modules_behind_the_tests_imports_are_the_tests_own(sandbox, name):
    program, setup, test = DEPENDENCIES[name]
    run_attack(sandbox, assert_job(program, test, setup=setup), threads=False)


# MBPP/596's tests call sys.getsizeof without importing sys: they rely on the program's import.
BORROWED = {
    "fake_class": "class sys:\n    getsizeof = staticmethod(lambda x: 0)\ndef f(t):\n    return 0\n",
    "patched_module": "import sys\nsys.getsizeof = lambda x: 0\ndef f(t):\n    return 0\n",
}


@pytest.mark.parametrize("name", sorted(BORROWED))
def test_a_module_the_tests_borrow_from_the_program_is_the_real_one(sandbox, name):
    run_attack(sandbox, assert_job(BORROWED[name], "assert f((1, 2)) == sys.getsizeof((1, 2))"))
    honest = "import sys\ndef f(t):\n    return sys.getsizeof(t)\n"
    assert sandbox.run(assert_job(honest, "assert f((1, 2)) == sys.getsizeof((1, 2))")).passed


def test_a_thread_that_keeps_patching_fails_the_run(sandbox):
    program = (
        "import math, threading, sys, time\nsys.setswitchinterval(1e-6)\n"
        "def spin():\n    while True:\n        math.isclose = lambda *a, **k: True\n"
        "        time.sleep(0)\nthreading.Thread(target=spin, daemon=True).start()\n"
        "def f(x):\n    return 0.0\n"
    )
    setup = (
        "import math\ndef check(candidate):\n    v = candidate(1)\n"
        "    for _ in range(200000):\n        pass\n    assert math.isclose(v, 0.5)\n"
    )
    job = Job(program, AssertTests(setup, ("check(candidate)",)), "f", allow_threads=True)
    r = sandbox.run(job)
    assert r.verdict is not Verdict.PASSED, (r.verdict, r.tampering)


def test_a_grading_failure_fails_one_run_and_shifts_no_result(monkeypatch):
    """Grading raised once (a malformed message): the worker's second pipelined reply must go to
    its own job, not to the next one."""
    calls = []

    def flaky(job, raws, attempts=1):
        calls.append(job.id)
        if len(calls) == 1:
            raise KeyError("value")
        return grade(job, raws, attempts)

    monkeypatch.setattr(run_outcome, "grade", flaky)
    wrong = "def f(x):\n    return x\n"
    jobs = [
        Job(HONEST, AssertTests("", ("assert f(1) == 2",)), "f", id="first"),
        Job(wrong, AssertTests("", ("assert f(1) == 2",)), "f", id="wrong"),
        Job(HONEST, AssertTests("", ("assert f(1) == 2",)), "f", id="right"),
    ]
    with Sandbox(workers=1, max_retries=0) as sb:
        results = sb.run_many(jobs)
    # What grading reads is what the program produced: failing to grade it is the program's
    # verdict, never a masked SANDBOX_ERROR.
    assert [r.verdict for r in results] == [
        Verdict.WRONG_ANSWER,
        Verdict.WRONG_ANSWER,
        Verdict.PASSED,
    ]
    assert "could not be graded" in results[0].message
    assert [r.sandbox_error_cause for r in results] == ["", "", ""]


def _raw(forged: int) -> dict:
    events = [
        {"t": "loaded"},
        {"t": "start", "i": 0},
        {"t": "result", "i": 0, "ok": True},
        {"t": "done", "n": 1},
    ]
    return {"events": events, "forged": forged, "exit_code": 0, "timed_out": False}


def test_forged_messages_or_a_bent_module_never_pass():
    job = assert_job(HONEST)
    # Hand-derived: the same four harness messages pass with nothing forged, and are a wrong
    # answer with one forged line or with a module the restore had to put back.
    assert grade(job, [_raw(0)]).verdict is Verdict.PASSED
    forged = grade(job, [_raw(1)])
    assert forged.verdict is Verdict.WRONG_ANSWER and "tampering" in forged.message
    bent = _raw(0)
    bent["events"].insert(1, {"t": "denied", "event": "modified module math"})
    assert grade(job, [bent]).verdict is Verdict.WRONG_ANSWER
    denied_only = _raw(0)  # the standard library tries sys._getframe and falls back
    denied_only["events"].insert(1, {"t": "denied", "event": "sys._getframe"})
    assert grade(job, [denied_only]).verdict is Verdict.PASSED


def test_the_channel_believes_only_the_harness_s_lines_in_order():
    """Hand-built: three sealed lines read in order; a changed, a reordered, a replayed and an
    unsealed line each end the reading there, and what follows is counted as forged."""
    key = b"k" * 16
    lines = [
        protocol.seal(key, 0, b'{"t":"loaded"}'),
        protocol.seal(key, 1, b'{"t":"start","i":0}'),
        protocol.seal(key, 2, b'{"t":"result","i":0,"ok":false}'),
    ]
    reader = protocol.ChannelReader(key)
    data = b"".join(lines)
    assert reader.feed(data, final=True) == 1  # one start
    assert [e["t"] for e in reader.events] == ["loaded", "start", "result"]
    assert reader.forged(data) == 0
    changed = lines[2].replace(b'"ok":false', b'"ok":true ')
    reordered = [lines[0], lines[2], lines[1]]
    replayed = [lines[0], lines[1], lines[1]]
    unsealed = [lines[0], b'{"t":"done","n":1}\n', lines[1]]
    other_key = [lines[0], protocol.seal(b"x" * 16, 1, b'{"t":"done","n":1}')]
    for bad, believed, forged in [
        ([lines[0], lines[1], changed], 2, 1),
        (reordered, 1, 2),
        (replayed, 2, 1),
        (unsealed, 1, 2),
        (other_key, 1, 1),
    ]:
        reader, data = protocol.ChannelReader(key), b"".join(bad)
        reader.feed(data, final=True)
        assert (len(reader.events), reader.forged(data)) == (believed, forged), bad


# A thread that keeps swapping a pipe of its own onto fd 3 and back, and writes every line it
# catches there back to the real channel changed into a pass (and a "done" after it).
THREAD_DIVERTS_CHANNEL = r"""
import os, threading, sys
sys.setswitchinterval(1e-6)
_real = os.dup(3)
_r, _w = os.pipe()
os.set_blocking(_r, False)
def divert():
    while True:
        os.dup2(_w, 3)
        os.dup2(_real, 3)
        try:
            caught = os.read(_r, 1 << 16)
        except BlockingIOError:
            continue
        for line in caught.split(b"\n"):
            if line:
                os.write(_real, line.replace(b'"ok":false', b'"ok":true') + b"\n")
                os.write(_real, line[: line.index(b"{")] + b'{"t":"done","n":1}\n')
threading.Thread(target=divert, daemon=True).start()
def f(x):
    return x
"""


def test_a_thread_that_diverts_the_channel_forges_nothing(sandbox):
    job = Job(
        THREAD_DIVERTS_CHANNEL,
        AssertTests("", ("assert f(1) == 2",)),
        "f",
        allow_threads=True,
        limits=Limits(wall_s=5),
    )
    for _ in range(5):
        r = sandbox.run(job)
        assert r.verdict is not Verdict.PASSED, (r.verdict, r.message, r.tampering)
