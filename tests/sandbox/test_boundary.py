"""Attack class: the candidate's code running outside its own calls, and what crosses the boundary.

The harness restores the modules the tests use after every call into the candidate. These
attacks act after that restore, while the test code runs: a signal handler, a garbage-collector
finalizer, a weakref callback or a finalizer planted in an argument patches `math` before the
tests use it; or a lying object comes back through an argument or as a dict subclass. Each
program is wrong unless the attack works (see `guard`)."""

from __future__ import annotations

import pytest

from execrl.sandbox import Verdict
from sandbox_helpers import assert_job, run_attack

PATCH = "math.isclose = lambda *a, **k: True"


def wrong_answer(sandbox, program: str, setup: str):
    """Run the attack with the tests `check(candidate)` from `setup`: it must fail as a wrong
    answer (the program is wrong unless the attack works)."""
    r = run_attack(sandbox, assert_job(program, "check(candidate)", setup))
    assert r.verdict is Verdict.WRONG_ANSWER, (r.verdict, r.message)
    return r


# The tests call the candidate first and use math afterwards, so a restore after the call is
# too early to help.
USES_MATH_LATER = (
    "import math\ndef check(candidate):\n    v = candidate(1)\n"
    "    for _ in range(1000000):\n        pass\n    assert math.isclose(v, 0.5)\n"
)

ASYNC_ATTACKS = {
    "signal handler and timer": f"""
import math, signal
def handler(*args):
    {PATCH}
def f(x):
    signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, 0.001)
    return 0.0
""",
    "cpu-time timer": f"""
import math, signal
def handler(*args):
    {PATCH}
def f(x):
    signal.signal(signal.SIGPROF, handler)
    signal.setitimer(signal.ITIMER_PROF, 0.001)
    return 0.0
""",
    "garbage-collector finalizer": f"""
import gc, math
class Evil:
    def __del__(self):
        {PATCH}
def f(x):
    gc.set_threshold(1, 1, 1)
    a = Evil()
    a.me = a
    del a
    return 0.0
""",
    "finalizer of a raised exception": f"""
import math
class Evil(Exception):
    def __del__(self):
        {PATCH}
def f(x):
    if x == 1:
        raise Evil()
    return 0.0
""",
}


@pytest.mark.parametrize("name", sorted(ASYNC_ATTACKS))
def test_candidate_code_between_the_tests_lines(sandbox, name):
    setup = USES_MATH_LATER
    if "exception" in name:  # the tests swallow the exception and go on
        setup = (
            "import math\ndef check(candidate):\n    v = candidate(2)\n    try:\n"
            "        candidate(1)\n    except Exception:\n        pass\n"
            "    assert math.isclose(v, 0.5)\n"
        )
    wrong_answer(sandbox, ASYNC_ATTACKS[name], setup)


# The tests drop what they passed once the call is over; whatever the candidate hung on it runs.
DROPPED_ARGUMENT = {
    "finalizer planted in an argument": (
        f"import math\nclass Evil:\n    def __del__(self):\n        {PATCH}\n"
        "def f(xs):\n    xs.append(Evil())\n    return 0.0\n",
        "[1]",
    ),
    "weakref callback on an argument": (
        "import math, weakref\nkeep = []\ndef f(s):\n"
        f"    keep.append(weakref.ref(s, lambda r: exec({PATCH!r}, {{'math': math}})))\n"
        "    return 0.0\n",
        "frozenset([1])",
    ),
}


@pytest.mark.parametrize("name", sorted(DROPPED_ARGUMENT))
def test_candidate_code_on_a_dropped_argument(sandbox, name):
    program, argument = DROPPED_ARGUMENT[name]
    setup = (
        f"import math\ndef check(candidate):\n    xs = {argument}\n    v = candidate(xs)\n"
        "    xs = None\n    assert math.isclose(v, 0.5)\n"
    )
    wrong_answer(sandbox, program, setup)


def test_lying_object_planted_in_an_argument(sandbox):
    """An in-place task: the tests look at the list they passed, not at the return value."""
    program = (
        "class AlwaysEqual(list):\n    def __eq__(self, other):\n        return True\n"
        "def f(xs):\n    xs.append(AlwaysEqual())\n"
    )
    setup = "def check(candidate):\n    xs = [3, 1]\n    candidate(xs)\n    assert xs == [1, 3]\n"
    r = wrong_answer(sandbox, program, setup)
    assert r.tests[0].exception == "NotPlainData"


LYING_DICT = """
class D(dict):
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    __hash__ = None
def f(x):
    return [D()]
"""


def test_dict_subclass_that_lies(sandbox):
    r = run_attack(sandbox, assert_job(LYING_DICT, "assert f(1) == [{'a': 1}]"))
    assert r.verdict is Verdict.WRONG_ANSWER


@pytest.mark.parametrize(
    "test",
    [
        "assert f('aab') == {'a': 2, 'b': 1}",
        "import collections\nassert f('aab') == collections.Counter('aab')",
        "assert f('aab')['a'] == 2",
    ],
)
def test_counter_still_passes(sandbox, test):
    """Honest code returns Counter, OrderedDict, defaultdict; the tests get the dict they hold."""
    program = "import collections\ndef f(s):\n    return collections.Counter(s)\n"
    assert sandbox.run(assert_job(program, test)).passed


def test_honest_code_with_signals_and_gc(sandbox):
    """What the boundary undoes must not fail honest code: an alarm of its own, the collector."""
    program = (
        "import gc, signal\ndef f(x):\n    signal.signal(signal.SIGALRM, lambda *a: None)\n"
        "    signal.alarm(5)\n    gc.collect()\n    return [{'v': x}]\n"
    )
    test = "assert f(1) == [{'v': 1}]\nassert f(2) == [{'v': 2}]"
    assert sandbox.run(assert_job(program, test)).passed


def test_helpers_the_tests_call_are_guarded(sandbox):
    """HumanEval/38 and /50 call a helper of the candidate's (`encode_cyclic`) themselves."""
    program = (
        f"import math, signal\ndef handler(*a):\n    {PATCH}\n"
        "def encode(s):\n    signal.signal(signal.SIGALRM, handler)\n"
        "    signal.setitimer(signal.ITIMER_REAL, 0.001)\n    return s\n"
        "def f(s):\n    return s\n"
    )
    setup = (
        "import math\ndef check(candidate):\n    e = encode('ab')\n    for _ in range(100000):\n"
        "        pass\n    assert math.isclose(len(candidate(e)), 0.5)\n"
    )
    wrong_answer(sandbox, program, setup)
    honest = "def encode(s):\n    return object()\ndef f(s):\n    return 'x'\n"
    ok = "def check(candidate):\n    e = encode('ab')\n    assert candidate(e) == 'x'\n"
    assert sandbox.run(assert_job(honest, "check(candidate)", ok)).passed


def test_attribute_of_a_parent_package(sandbox):
    """`import os.path` in the tests reads `path` off the `os` module."""
    program = (
        "import os, types\nos.path = types.SimpleNamespace(isabs=lambda p: True)\n"
        "def f(x):\n    return 'relative'\n"
    )
    setup = "import os.path\ndef check(candidate):\n    assert os.path.isabs(candidate(1))\n"
    wrong_answer(sandbox, program, setup)


LYING_MESSAGE = """
class Liar(str):
    def __eq__(self, other):
        return True
    __hash__ = str.__hash__
class NegativeInput(ValueError):
    def __str__(self):
        return Liar("x")
def f(x):
    raise {raised}
"""
CHECKS_THE_MESSAGE = (
    "def check(candidate):\n    try:\n        candidate(-1)\n    except ValueError as e:\n"
    "        assert str(e) == 'negative input'\n    else:\n        assert False\n"
)


@pytest.mark.parametrize("raised", ["NegativeInput()", "ValueError(Liar('x'))"])
def test_exception_with_a_lying_message(sandbox, raised):
    program = LYING_MESSAGE.format(raised=raised)
    wrong_answer(sandbox, program, CHECKS_THE_MESSAGE)


@pytest.mark.parametrize(
    "program",
    [
        "def f(x):\n    raise ValueError('negative input')\n",
        "class NegativeInput(ValueError):\n    pass\n"
        "def f(x):\n    raise NegativeInput('negative input')\n",
    ],
)
def test_honest_exceptions_reach_the_tests(sandbox, program):
    assert sandbox.run(assert_job(program, "check(candidate)", CHECKS_THE_MESSAGE)).passed


FAKE_FINDER = """
import sys
ModuleSpec = type(sys.__spec__)
class Finder:
    def find_spec(self, name, path=None, target=None):
        if name == "_strptime":
            return ModuleSpec(name, self)
    def create_module(self, spec):
        return None
    def exec_module(self, module):
        module._strptime_datetime = lambda cls, text, fmt: type(sys)("fake")
sys.modules.pop("_strptime", None)
sys.meta_path.insert(0, Finder())
def f(x):
    return 0
"""


def test_finder_planted_in_the_import_system(sandbox):
    """datetime imports _strptime the first time it parses: through the finders."""
    setup = (
        "import datetime\ndef check(candidate):\n"
        "    parsed = datetime.datetime.strptime('2020', '%Y')\n"
        "    assert getattr(parsed, 'year', 0) == candidate(1)\n"
    )
    wrong_answer(sandbox, FAKE_FINDER, setup)


@pytest.mark.parametrize(
    "program, test",
    [
        ("abs = lambda x: 0\ndef f(x):\n    return 10.0\n", "assert abs(f(1) - 0.5) < 1e-6"),
        ("len = lambda x: 3\ndef f(x):\n    return [1]\n", "assert len(f(1)) == 3"),
        (
            "def sorted(x):\n    return [1, 2]\ndef f(x):\n    return [3]\n",
            "assert sorted(f(1)) == [1, 2]",
        ),
    ],
)
def test_builtins_shadowed_by_the_candidates_globals(sandbox, program, test):
    """The tests run on a namespace made from the candidate's: its globals must not stand in
    for the builtins the tests use."""
    r = run_attack(sandbox, assert_job(program, test))
    assert r.verdict is Verdict.WRONG_ANSWER


def test_recursion_limit_left_too_low_for_the_restore(sandbox):
    """The candidate patches math and leaves a recursion limit at which the restore after the
    call cannot run; the tests swallow what comes out and use math."""
    program = (
        f"import math, sys\ndef f(x):\n    {PATCH}\n"
        "    for k in range(5, 500):\n        try:\n            sys.setrecursionlimit(k)\n"
        "            break\n        except RecursionError:\n            continue\n    return 0.0\n"
    )
    setup = (
        "import math\ndef check(candidate):\n    results = []\n    for x in (1, 2):\n"
        "        try:\n            results.append(candidate(x))\n        except Exception:\n"
        "            results.append(None)\n"
        "    assert all(math.isclose(r or 0.0, 0.5) for r in results)\n"
    )
    wrong_answer(sandbox, program, setup)


def test_deep_recursion_of_honest_code_still_works(sandbox):
    program = (
        "import sys\nsys.setrecursionlimit(10000)\n"
        "def f(n):\n    return 0 if n == 0 else 1 + f(n - 1)\n"
    )
    assert sandbox.run(assert_job(program, "assert f(5000) == 5000\nassert f(6000) == 6000")).passed


def test_many_calls_with_numbers_keep_no_memory(sandbox):
    """What crossed the boundary is kept until the run ends, but not numbers and strings: a
    test that calls the candidate 150,000 times must not grow by what it passed."""
    program = "def f(x):\n    return x + 1\n"
    peaks = []
    for n in (1, 150_000):
        r = sandbox.run(assert_job(program, f"for i in range({n}):\n    assert f(i) == i + 1"))
        assert r.passed
        peaks.append(r.peak_memory_kb)
    assert peaks[1] - peaks[0] < 15_000, peaks  # 37 MB more when every call was kept
