"""The per-test clock (`Limits.test_wall_s`) times the call, as EvalPlus's does: from the call to
its return. Carrying a large returned value out of the sandbox (HumanEval+'s HumanEval/130 and
/15 return megabytes over their inputs) is not the test's time; the run's own wall clock still
bounds it."""

from __future__ import annotations

import time

from execrl.sandbox import Verdict
from sandbox_helpers import call_job

# 16 MB of strings: built in ~0.1 s, carried out (encoded, sent, read, compared) in over 1 s.
BIG = "def f(x):\n    return [str(i % 10) * 40 for i in range(400_000)]\n"
VALUE = [str(i % 10) * 40 for i in range(400_000)]
LIMIT_S = 0.2


def test_carrying_a_large_return_value_out_is_not_the_test_s_time(sandbox):
    job = call_job(BIG, [(0,)], [VALUE], test_wall_s=LIMIT_S, wall_s=60.0)
    t0 = time.perf_counter()
    result = sandbox.run(job)
    assert result.verdict is Verdict.PASSED, (result.verdict, result.message)
    # the carrying out took longer than the per-test limit: otherwise this tests nothing
    assert time.perf_counter() - t0 > LIMIT_S


def test_a_call_over_the_per_test_limit_still_times_out(sandbox):
    slow = "import time\ndef f(x):\n    time.sleep(x)\n    return list(range(10))\n"
    job = call_job(slow, [(0,), (2,)], [list(range(10))] * 2, test_wall_s=0.5, wall_s=30.0)
    result = sandbox.run(job)
    assert result.verdict is Verdict.TIMEOUT
    assert "per-test" in result.message
