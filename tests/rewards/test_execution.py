"""Execution components on hand-made results; expected values derived in the comments."""

from __future__ import annotations

import pytest

from execrl.rewards import CODERL_VALUES, PassAll, PassFraction, Runs, VerdictCredit
from execrl.rewards.result import Flag
from execrl.sandbox import Verdict

from .conftest import result, sample


def test_pass_all_is_binary():
    assert PassAll()(sample(res=result(Verdict.PASSED, 3))).score == 1.0
    assert PassAll()(sample(res=result(Verdict.WRONG_ANSWER, 2))).score == 0.0


def test_pass_fraction():
    # 2 of 3 passed -> 2/3
    assert PassFraction()(sample(res=result(Verdict.WRONG_ANSWER, 2))).score == pytest.approx(2 / 3)
    # a run killed after all 3 tests passed scores at most (3 - 1) / 3, below a passing run
    killed = result(Verdict.RUNTIME_ERROR, 3)
    assert PassFraction()(sample(res=killed)).score == pytest.approx(2 / 3)
    assert PassFraction()(sample(res=result(Verdict.PASSED, 3))).score == 1.0


def test_runs_only_for_answers():
    assert Runs()(sample(res=result(Verdict.WRONG_ANSWER, 1))).score == 1.0
    assert Runs()(sample(res=result(Verdict.RUNTIME_ERROR, 1))).score == 0.0
    assert Runs()(sample(res=result(Verdict.TIMEOUT, 0))).score == 0.0


@pytest.mark.parametrize(
    ("verdict", "expected"),
    [
        (Verdict.PASSED, 1.0),  # CodeRL: +1
        (Verdict.WRONG_ANSWER, -0.3),  # failed unit test
        (Verdict.RUNTIME_ERROR, -0.6),
        (Verdict.TIMEOUT, -0.6),
        (Verdict.SYNTAX_ERROR, -1.0),  # compile error
    ],
)
def test_verdict_credit_coderl_defaults(verdict, expected):
    r = VerdictCredit()(sample(res=result(verdict, 3 if verdict is Verdict.PASSED else 0)))
    assert r.score == expected
    assert r.components == {"verdict_credit": expected}


def test_verdict_credit_configurable():
    credit = VerdictCredit(values={"TIMEOUT": -0.8})
    assert credit(sample(res=result(Verdict.TIMEOUT))).score == -0.8
    assert credit.bounds == (-1.0, 1.0)
    with pytest.raises(ValueError, match="SANDBOX_ERROR is always masked"):
        VerdictCredit(values={"SANDBOX_ERROR": 0.0})
    assert CODERL_VALUES["WRONG_ANSWER"] == -0.3


@pytest.mark.parametrize("reward", [PassAll(), PassFraction(), Runs(), VerdictCredit()])
def test_sandbox_error_is_masked_never_scored(reward):
    r = reward(sample(res=result(Verdict.SANDBOX_ERROR, message="worker died")))
    assert r.masked and r.score == 0.0
    assert Flag.SANDBOX_ERROR in r.flags and "worker died" in r.reason


def test_visible_tests_and_missing_results():
    s = sample(res=result(Verdict.WRONG_ANSWER, 2), visible_result=result(Verdict.PASSED, 1, n=1))
    assert PassAll(tests="visible")(s).score == 1.0
    assert PassAll()(s).score == 0.0
    with pytest.raises(ValueError, match="not executed"):
        PassAll()(sample(res=None))
    with pytest.raises(ValueError, match="tests must be"):
        PassAll(tests="secret")
