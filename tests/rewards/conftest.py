from __future__ import annotations

import pytest

from execrl.rewards import Sample
from execrl.sandbox import ExecutionResult, Sandbox, TestOutcome, Verdict
from execrl.tasks import AssertTests, Task

TASK = Task(
    id="inc",
    prompt="Write f(x) returning x + 1.",
    tests=AssertTests(statements=("assert f(1) == 2", "assert f(2) == 3", "assert f(10) == 11")),
    entry_point="f",
    visible_tests=AssertTests(statements=("assert f(10) == 11",)),
)


@pytest.fixture(scope="session")
def sandbox():
    with Sandbox(workers=2) as sb:
        yield sb


def result(verdict: Verdict, passed: int = 0, n: int = 3, **kw) -> ExecutionResult:
    """A hand-made result: `passed` tests passed, the rest failed with `verdict`."""
    fail = Verdict.WRONG_ANSWER if verdict is Verdict.PASSED else verdict
    tests = tuple(TestOutcome(i, Verdict.PASSED if i < passed else fail) for i in range(n))
    if verdict in (Verdict.SYNTAX_ERROR, Verdict.SANDBOX_ERROR):
        tests = ()
    return ExecutionResult(verdict, tests=tests, n_tests=n, **kw)


def sample(program: str | None = "def f(x):\n    return x + 1\n", res=None, **kw) -> Sample:
    if program is None:
        return Sample(TASK, "", None, result=res, **kw)
    return Sample.of(TASK, program, res, **kw)
