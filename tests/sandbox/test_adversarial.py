"""One adversarial test per attack class: the verdict is never PASSED and the host is untouched.

Every program here returns the wrong answer (or none) unless it cheats, so a PASSED verdict
would mean the cheat worked. After each attack the pool must still grade an honest program."""

from __future__ import annotations

import dataclasses
import os
import socket
import threading
import time
from pathlib import Path

import pytest

from execrl.sandbox import Verdict
from sandbox_helpers import (
    ALWAYS_EQUAL,
    HUMANEVAL_STYLE,
    assert_job,
    call_job,
    run_attack,
    sandbox_processes,
)

# -- exit before the tests ------------------------------------------------------------------


@pytest.mark.parametrize(
    "program",
    [
        "import sys\nsys.exit(0)\ndef f(x):\n    return 0\n",
        "import os\nos._exit(0)\n",
        "def f(x):\n    import sys\n    sys.exit(0)\n",
        "def f(x):\n    import os\n    os._exit(0)\n",
        "raise SystemExit\n",
        "def f(x):\n    exit()\n",
    ],
)
def test_exit_before_or_during_tests(sandbox, program):
    r = run_attack(sandbox, assert_job(program, "check(candidate)", HUMANEVAL_STYLE))
    assert r.verdict is Verdict.RUNTIME_ERROR


def test_skiptest(sandbox):
    run_attack(
        sandbox,
        assert_job(
            "import unittest\nraise unittest.SkipTest('no')\n", "check(candidate)", HUMANEVAL_STYLE
        ),
    )
    run_attack(
        sandbox,
        assert_job(
            "import unittest\ndef f(x):\n    raise unittest.SkipTest('no')\n",
            "check(candidate)",
            HUMANEVAL_STYLE,
        ),
    )


# -- objects that lie about equality ----------------------------------------------------------

INT_SUBCLASS = """
class Liar(int):
    def __eq__(self, other):
        return True
    __hash__ = int.__hash__
def f(x):
    return Liar(0)
"""
NESTED = ALWAYS_EQUAL.replace("return AlwaysEqual()", "return [AlwaysEqual()]")


@pytest.mark.parametrize("program", [ALWAYS_EQUAL, INT_SUBCLASS, NESTED])
def test_always_equal_objects(sandbox, program):
    r = run_attack(sandbox, assert_job(program, "check(candidate)", HUMANEVAL_STYLE))
    assert r.verdict is Verdict.WRONG_ANSWER
    assert r.tests[0].exception == "NotPlainData"
    # The same object as a call-test output: never compared equal in the parent.
    run_attack(sandbox, call_job(program, [(1,)], [2]))


def test_always_equal_swallowed_by_test_code(sandbox):
    setup = "def check(candidate):\n    try:\n        assert candidate(1) == 2\n    except Exception:\n        pass\n"
    r = run_attack(sandbox, assert_job(ALWAYS_EQUAL, "check(candidate)", setup))
    assert r.tests[0].exception == "NotPlainData"


# -- monkeypatched builtins and standard modules ----------------------------------------------


@pytest.mark.parametrize(
    "program, setup",
    [
        (
            "import math\nmath.isclose = lambda *a, **k: True\ndef f(x):\n    return 0.0\n",
            "import math\ndef check(candidate):\n    assert math.isclose(candidate(1), 0.5)\n",
        ),
        (
            "import builtins\nbuiltins.abs = lambda x: 0\ndef f(x):\n    return 10.0\n",
            "def check(candidate):\n    assert abs(candidate(1) - 0.5) < 1e-6\n",
        ),
        (
            "def f(x):\n    import builtins, math\n    builtins.abs = lambda x: 0\n    math.isclose = lambda *a, **k: True\n    return 10.0\n",
            "import math\ndef check(candidate):\n    v = candidate(1)\n    assert abs(v - 0.5) < 1e-6 and math.isclose(v, 0.5)\n",
        ),
        (
            "import builtins\nbuiltins.AssertionError = KeyboardInterrupt\ndef f(x):\n    return 0\n",
            "def check(candidate):\n    assert candidate(1) == 2\n",
        ),
        (  # the harness's own helpers and the JSON encoder it reports with
            "import execrl.sandbox.run.harness as h, execrl.tasks.values as p, json, json.encoder\n"
            "p.to_json = lambda v, *a: 0\nh._exception_fields = lambda e, s: {'cls': 'pass'}\n"
            'json.dumps = lambda *a, **k: \'{"t":"result","ok":true}\'\njson.encoder.c_make_encoder = None\n'
            + ALWAYS_EQUAL,
            "def check(candidate):\n    assert candidate(1) == 2\n",
        ),
        (  # a class the tests use, patched in place
            "import collections\ncollections.Counter.__eq__ = lambda s, o: True\ndef f(x):\n    return collections.Counter('a')\n",
            "import collections\ndef check(candidate):\n    assert collections.Counter(candidate(1)) == collections.Counter('bb')\n",
        ),
        (  # one entry that held None deleted and another planted: the class dict keeps its size
            "import collections\ndel collections.Counter.__hash__\n"
            "collections.Counter.__contains__ = lambda s, k: True\ndef f(x):\n    return 'a'\n",
            "import collections\ndef check(candidate):\n    assert 'z' in collections.Counter(candidate(1))\n",
        ),
    ],
)
def test_monkeypatching(sandbox, program, setup):
    run_attack(sandbox, assert_job(program, "check(candidate)", setup))


def test_patched_class_is_reported_as_tampering(sandbox):
    program = "import collections\ncollections.Counter.__eq__ = lambda s, o: True\n"
    setup = "import collections\n" + HUMANEVAL_STYLE
    r = run_attack(sandbox, assert_job(program, "check(candidate)", setup))
    assert "modified class Counter" in r.tampering


# -- trace and profile hooks ------------------------------------------------------------------

TRACE_SKIP = """
import sys
def tracer(frame, event, arg):
    if event == "line" and frame.f_code.co_filename == "<tests>":
        frame.f_lineno = frame.f_lineno + 1  # jump over the assert
    return tracer
sys.settrace(tracer)
def f(x):
    return 0
"""


@pytest.mark.parametrize(
    "program",
    [
        TRACE_SKIP,
        TRACE_SKIP.replace("sys.settrace(tracer)", "sys.setprofile(tracer)"),
        TRACE_SKIP.replace(
            "sys.settrace(tracer)",
            # joined, so that the thread has asked for its trace hook before the tests run
            "import threading\nthreading.settrace(tracer)\nt = threading.Thread(target=lambda: None)\nt.start()\nt.join()",
        ),
        "def f(x):\n    import sys\n    sys.settrace(lambda *a: None)\n    return 0\n",
    ],
)
def test_trace_hooks(sandbox, program):
    r = run_attack(sandbox, assert_job(program, "check(candidate)", HUMANEVAL_STYLE))
    assert r.tampering


# -- reading expected values from the caller's frame ------------------------------------------


@pytest.mark.parametrize(
    "program",
    [
        "import sys\ndef f(x):\n    return sys._getframe(1).f_locals.get('expected')\n",
        "import inspect\ndef f(x):\n    return inspect.currentframe().f_back.f_locals['expected']\n",
        "import sys\ndef f(x):\n    try:\n        raise ValueError\n    except ValueError as e:\n        return e.__traceback__.tb_frame.f_back.f_locals['expected']\n",
        "def f(x):\n    def g():\n        yield 1\n    it = g()\n    return it.gi_frame.f_back\n",
        "import gc\ndef f(x):\n    return [o for o in gc.get_objects() if isinstance(o, dict) and 'expected' in o][0]['expected']\n",
        "import traceback\ndef f(x):\n    return traceback.extract_stack()[-2].line\n",
    ],
)
def test_reading_the_callers_frame(sandbox, program):
    setup = "def check(candidate):\n    expected = 41\n    assert candidate(40) == expected\n"
    run_attack(sandbox, assert_job(program, "check(candidate)", setup))


# -- fake success output ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "program",
    [
        'print(\'passed\')\nprint(\'{"t":"done","n":1}\')\ndef f(x):\n    return 0\n',
        # write fake harness messages straight to every open descriptor
        'import os\nfor fd in range(3, 64):\n    try:\n        os.write(fd, b\'0\'*32 + b\'{"t":"result","i":0,"ok":true}\\n\' + b\'0\'*32 + b\'{"t":"done","n":1}\\n\')\n    except OSError:\n        pass\nos._exit(0)\n',
    ],
)
def test_fake_success_output(sandbox, program):
    r = run_attack(sandbox, assert_job(program, "check(candidate)", HUMANEVAL_STYLE))
    assert r.verdict in (Verdict.RUNTIME_ERROR, Verdict.WRONG_ANSWER)


# -- timeouts that try to escape --------------------------------------------------------------


@pytest.mark.parametrize(
    "program",
    [
        "def f(x):\n    while True:\n        try:\n            while True:\n                pass\n        except BaseException:\n            pass\n",
        # Runs may set no signal action (handler_filter): each refusal is swallowed too.
        "import _signal, signal\nsignal.alarm(0)\nsignal.setitimer(signal.ITIMER_REAL, 0)\n"
        "for sig in (signal.SIGALRM, signal.SIGXCPU, signal.SIGTERM):\n"
        "    for set_action in (signal.signal, _signal.signal):\n        try:\n"
        "            set_action(sig, _signal.SIG_IGN)\n        except OSError:\n            pass\n"
        "def f(x):\n    while True:\n        pass\n",
        "import time\ndef f(x):\n    while True:\n        try:\n            time.sleep(10)\n        except BaseException:\n            pass\n",
    ],
)
def test_timeouts_cannot_be_swallowed(sandbox, program):
    t0 = time.monotonic()
    r = run_attack(sandbox, assert_job(program, "check(candidate)", HUMANEVAL_STYLE, wall_s=1.0))
    assert r.verdict is Verdict.TIMEOUT
    assert time.monotonic() - t0 < 8


# -- killing or signalling the parent ----------------------------------------------------------


@pytest.mark.parametrize(
    "program",
    [
        "import os, signal\nfor sig in (signal.SIGKILL, signal.SIGTERM):\n    for pid in (os.getppid(), 1, -1):\n        try:\n            os.kill(pid, sig)\n        except OSError:\n            pass\n",
        "import os, signal\nfor name in os.listdir('/proc'):\n    if name.isdigit() and int(name) != os.getpid():\n        try:\n            os.kill(int(name), signal.SIGKILL)\n        except OSError:\n            pass\n",
        "import os, signal\nfor pg in range(1, 5000):\n    try:\n        os.killpg(pg, signal.SIGKILL)\n    except OSError:\n        pass\n",
    ],
)
def test_signalling_the_parent(sandbox, program):
    pids = sandbox.worker_pids()
    run_attack(sandbox, assert_job(program, "check(candidate)", HUMANEVAL_STYLE))
    assert sandbox.worker_pids() == pids, "a worker was killed"
    assert sandbox.stats.worker_restarts == 0 or True  # the pool survived (run_attack checked it)


# -- resource exhaustion ------------------------------------------------------------------------


def test_no_process_and_no_lingering_thread_without_allow_threads(sandbox):
    for program in (
        "import os\nos.fork()\n",
        "import threading, time\nthreading.Thread(target=time.sleep, args=(5,)).start()\n"
        "def f(x):\n    return x + 1\n",
    ):
        r = run_attack(
            sandbox, assert_job(program, "check(candidate)", HUMANEVAL_STYLE), threads=False
        )
        assert r.verdict is Verdict.RUNTIME_ERROR


def test_fork_bomb(sandbox):
    program = (
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    )
    run_attack(sandbox, assert_job(program, "check(candidate)", HUMANEVAL_STYLE, wall_s=2.0))
    assert sandbox_processes(sandbox) == []


def test_memory_bomb(sandbox):
    program = "x = []\nwhile True:\n    x.append(bytearray(1 << 24))\n"
    r = run_attack(sandbox, assert_job(program, "check(candidate)", HUMANEVAL_STYLE, memory_mb=256))
    assert r.verdict is Verdict.MEMORY_LIMIT
    program = "def f(x):\n    return [0] * (1 << 40)\n"
    assert (
        run_attack(sandbox, assert_job(program, "check(candidate)", HUMANEVAL_STYLE)).verdict
        is Verdict.MEMORY_LIMIT
    )


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_output_flood(sandbox, stream):
    program = f"import sys\nwhile True:\n    sys.{stream}.write('x' * 65536)\n"
    t0 = time.monotonic()
    r = run_attack(sandbox, assert_job(program, "check(candidate)", HUMANEVAL_STYLE, wall_s=10.0))
    assert r.verdict is Verdict.OUTPUT_LIMIT
    assert time.monotonic() - t0 < 5


def test_filling_the_disk(sandbox):
    program = (
        "import os\nn = 0\ntry:\n    while True:\n        with open(f'f{n}', 'wb') as fh:\n            fh.write(b'x' * (1 << 20) * 8)\n        n += 1\n"
        "except OSError as e:\n    print('stopped', n, e)\ndef f(x):\n    return 0\n"
    )
    before = os.statvfs("/").f_bavail
    r = run_attack(sandbox, assert_job(program, "check(candidate)", HUMANEVAL_STYLE, wall_s=10.0))
    assert "stopped" in r.stdout
    assert abs(os.statvfs("/").f_bavail - before) * os.statvfs("/").f_frsize < 64 << 20


def test_writing_outside_the_scratch_directory(sandbox, tmp_path):
    targets = [
        "/tmp/execrl-escape",
        "/etc/execrl-escape",
        "/root/execrl-escape",
        "/var/tmp/execrl-escape",
        "/dev/shm/execrl-escape",
        str(tmp_path / "escape"),
        str(Path.cwd() / "execrl-escape"),
    ]
    program = f"import os\nfor t in {targets!r}:\n    try:\n        open(t, 'w').write('x')\n        print('WROTE', t)\n    except OSError as e:\n        print('denied', t, e)\n"
    r = run_attack(sandbox, assert_job(program, "check(candidate)", HUMANEVAL_STYLE))
    assert "WROTE" not in r.stdout, r.stdout
    for t in targets:
        assert not os.path.exists(t), t


def test_daemon_that_outlives_the_run(sandbox, tmp_path):
    program = (
        "import os, time\n"
        "if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        time.sleep(3)\n        open('/tmp/daemon-was-here', 'w')\n        os._exit(0)\n    os._exit(0)\n"
        "def f(x):\n    return x + 1\n"
    )
    r = sandbox.run(
        dataclasses.replace(
            assert_job(program, "check(candidate)", HUMANEVAL_STYLE), allow_threads=True
        )
    )
    assert r.passed  # the program itself is correct; its daemon must still be gone
    assert sandbox_processes(sandbox) == []
    program_abnormal = program.replace("def f(x):\n    return x + 1\n", "os._exit(3)\n")
    run_attack(sandbox, assert_job(program_abnormal, "check(candidate)", HUMANEVAL_STYLE))
    assert sandbox_processes(sandbox) == []


# -- the network ------------------------------------------------------------------------------


def test_network_connections(sandbox):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    server.settimeout(0.1)
    port = server.getsockname()[1]
    accepted: list[object] = []

    def accept_loop(deadline: float) -> None:
        while time.monotonic() < deadline:
            try:
                accepted.append(server.accept())
            except OSError:
                pass

    t = threading.Thread(target=accept_loop, args=(time.monotonic() + 4,))
    t.start()
    program = (
        "import socket\nok = False\nfor host in ('127.0.0.1', 'localhost', '::1'):\n    try:\n"
        f"        socket.create_connection((host, {port}), timeout=1)\n        ok = True\n    except OSError as e:\n        print(host, e)\n"
        "def f(x):\n    return x + 1 if ok else 0\n"
    )
    try:
        run_attack(sandbox, assert_job(program, "check(candidate)", HUMANEVAL_STYLE))
    finally:
        t.join()
        server.close()
    assert accepted == []


# -- secrets ----------------------------------------------------------------------------------


def test_environment_and_proc_secrets(tmp_path):
    from execrl.sandbox import Sandbox

    secret = "execrl-secret-6f1d2c"
    private = tmp_path / "private.txt"
    private.write_text(secret)
    private.chmod(0o600)
    os.environ["EXECRL_TEST_SECRET"] = secret
    try:
        with Sandbox(workers=1) as sb:
            program = (
                "import os\nseen = repr(dict(os.environ))\n"
                f"for p in ['/proc/1/environ', '/proc/self/environ', f'/proc/{{os.getppid()}}/environ', {str(private)!r}]:\n"
                "    try:\n        seen += open(p, errors='replace').read()\n    except OSError as e:\n        pass\n"
                "for name in os.listdir('/proc'):\n    try:\n        seen += open(f'/proc/{name}/environ', errors='replace').read()\n    except OSError:\n        pass\n"
                f"print(seen)\ndef f(x):\n    return x + 1 if {secret!r} in seen else 0\n"
            )
            r = sb.run(
                dataclasses.replace(
                    assert_job(program, "check(candidate)", HUMANEVAL_STYLE), allow_threads=True
                )
            )
            assert r.verdict is not Verdict.PASSED
            assert secret not in r.stdout
    finally:
        del os.environ["EXECRL_TEST_SECRET"]


@pytest.mark.parametrize(
    "opening",
    [
        "open('/proc/self/mem', 'rb')",
        "open('/proc/self/fd/../mem', 'rb')",  # paths the audit hook's pattern does not catch:
        "open('/proc//self/mem', 'rb')",  # the kernel must refuse them (non-dumpable, own uid)
        "open('/dev/fd/../mem', 'rb')",
        "os.chdir('/proc/self')\nopen('mem', 'rb')",
        "os.open('mem', os.O_RDONLY, dir_fd=os.open('/proc/self', os.O_RDONLY))",
        "os.symlink('/proc/self/mem', 'm')\nopen('m', 'rb')",
    ],
)
def test_reading_own_memory(sandbox, opening):
    """The token lives in the harness's memory; reading /proc/self/mem would give it away."""
    program = f"import os\n{opening}\nprint('OPENED')\ndef f(x):\n    return x + 1\n"
    r = run_attack(sandbox, assert_job(program))
    assert "OPENED" not in r.stdout


# -- crashing the interpreter ------------------------------------------------------------------


@pytest.mark.parametrize(
    "program",
    [
        "import ctypes\nctypes.string_at(0)\n",
        "import ctypes\nctypes.cast(1, ctypes.POINTER(ctypes.c_int))[0] = 1\n",
        "import faulthandler\nfaulthandler._sigsegv()\n",
        # C-stack overflow: repr of a deeply nested list recurses in C once the limit is lifted
        "import sys\nsys.setrecursionlimit(10 ** 8)\nx = []\nfor _ in range(10 ** 5):\n    x = [x]\nrepr(x)\n",
    ],
)
def test_segfaults_and_stack_overflow(sandbox, program):
    # A crash is slow on this kind of VM (the kernel logs each segfault to a serial console).
    r = run_attack(sandbox, assert_job(program, "check(candidate)", HUMANEVAL_STYLE, wall_s=20))
    assert r.verdict is Verdict.RUNTIME_ERROR
    if "ctypes" not in program:
        assert "SIGSEGV" in r.message, r.message


def test_python_recursion_without_limit(sandbox):
    program = (
        "import sys\nsys.setrecursionlimit(10 ** 7)\ndef r(n):\n    return r(n + 1) + 1\nr(0)\n"
    )
    r = run_attack(sandbox, assert_job(program, "check(candidate)", HUMANEVAL_STYLE, memory_mb=512))
    assert r.verdict in (Verdict.MEMORY_LIMIT, Verdict.TIMEOUT, Verdict.RUNTIME_ERROR)
