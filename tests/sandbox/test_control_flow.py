"""Attack class: an exception leaving the candidate that steers the test code silently.

`StopIteration` raised inside a callable that `map`, `filter`, `iter(f, sentinel)` or `zip`
drives ends that iteration early, so `all(...)` over it sees nothing false; `StopAsyncIteration`
ends an `async for`; `GeneratorExit` inside a generator being closed reads as a clean close.
These reach the tests as a RuntimeError (PEP 479 does the same for generators), so each wrong
program below fails."""

from __future__ import annotations

import pytest

from execrl.sandbox import Verdict
from sandbox_helpers import assert_job, run_attack

WRONG = {
    "StopIteration": "def f(x):\n    raise StopIteration\n",
    "StopIteration subclass": "class Done(StopIteration):\n    pass\ndef f(x):\n    raise Done()\n",
    "StopAsyncIteration": "def f(x):\n    raise StopAsyncIteration\n",
    "GeneratorExit": "def f(x):\n    raise GeneratorExit\n",
}

# Test code that an early end of iteration would turn into a pass.
STEERED = {
    "map": "assert all(map(lambda x: candidate(x) == x + 1, range(5)))",
    "filter": "assert not list(filter(lambda x: candidate(x) != x + 1, range(5)))",
    "iter_sentinel": "assert all(v == 2 for v in iter(lambda: candidate(1), 'never'))",
    "async_for": (
        "class It:\n"
        "        def __aiter__(self):\n            return self\n"
        "        async def __anext__(self):\n            return candidate(1)\n"
        "    async def run():\n"
        "        async for v in It():\n            assert v == 2\n            return\n"
        "    try:\n        run().send(None)\n    except StopIteration:\n        pass"
    ),
    "generator_close": (
        "def g():\n"
        "        try:\n            yield 1\n"
        "        finally:\n            assert candidate(1) == 2\n"
        "    it = g()\n    next(it)\n    it.close()"
    ),
}


@pytest.mark.parametrize("steer", sorted(STEERED))
@pytest.mark.parametrize("name", sorted(WRONG))
def test_control_flow_exceptions_do_not_cross(sandbox, name, steer):
    setup = f"def check(candidate):\n    {STEERED[steer]}\n"
    r = run_attack(sandbox, assert_job(WRONG[name], "check(candidate)", setup), threads=False)
    assert r.verdict in (Verdict.RUNTIME_ERROR, Verdict.WRONG_ANSWER), (r.verdict, r.message)


def test_a_control_flow_exception_reaches_the_tests_as_runtime_error(sandbox):
    """What the tests see: a RuntimeError naming the exception, as PEP 479 words it."""
    setup = (
        "def check(candidate):\n    try:\n        candidate(1)\n"
        "    except RuntimeError as e:\n        assert 'StopIteration' in str(e), str(e)\n"
        "    else:\n        assert False\n"
    )
    r = sandbox.run(assert_job(WRONG["StopIteration"], "check(candidate)", setup))
    assert r.passed, (r.verdict, r.message)
