"""Combinators with leaves of known scores; expected values derived in the comments."""

from __future__ import annotations

import pytest

from execrl.rewards import (
    CallableReward,
    Gate,
    Hierarchy,
    Level,
    PassAll,
    PassFraction,
    Product,
    Runs,
    SyntaxValid,
    WeightedSum,
)
from execrl.rewards.result import RewardResult
from execrl.sandbox import Verdict

from .conftest import result, sample


def const(name: str, value: float, low: float = -1.0, high: float = 1.0) -> CallableReward:
    return CallableReward(lambda s: value, name=name, low=low, high=high)


def test_weighted_sum():
    r = WeightedSum(((1.0, const("a", 0.5)), (-2.0, const("b", 0.25))))(sample())
    assert r.score == pytest.approx(1.0 * 0.5 - 2.0 * 0.25)  # 0.0
    assert r.components == {"a": 0.5, "b": 0.25, "sum": pytest.approx(0.0)}
    # bounds: 1*[-1,1] + -2*[-1,1] = [-1,1] + [-2,2] = [-3, 3]
    assert WeightedSum(((1.0, const("a", 0)), (-2.0, const("b", 0)))).bounds == (-3.0, 3.0)


def test_product():
    assert Product((const("a", 0.5), const("b", -0.5)))(sample()).score == -0.25
    # bounds: [0,1] * [-1,1] -> corners {0, 0, -1, 1} -> [-1, 1]
    assert Product((const("a", 0, 0.0, 1.0), const("b", 0))).bounds == (-1.0, 1.0)


def test_gate_counts_only_when_the_condition_passed():
    gate = Gate(condition=const("cond", 1.0), reward=const("r", 0.7), otherwise=-0.2)
    assert gate(sample()).score == 0.7
    closed = Gate(condition=const("cond", 0.5), reward=const("r", 0.7), otherwise=-0.2)
    r = closed(sample())
    assert r.score == -0.2 and "r" not in r.components  # the gated reward never ran
    assert Gate(const("c", 0.5), const("r", 0.7), threshold=0.5)(sample()).score == 0.7
    assert closed.bounds == (-1.0, 1.0)


LEVELS = (
    Level(SyntaxValid(), -0.5),
    Level(Runs(), 0.0),
    Level(PassAll(tests="visible", name="pass_visible"), 0.5),
    Level(PassFraction(), 1.0),
)


@pytest.mark.parametrize(
    ("program", "hidden", "visible", "expected", "dense_expected"),
    [
        # does not parse: base -1; dense: syntax scores 0, so -1 + (−0.5 − −1) * 0 = -1
        ("def f(:\n", result(Verdict.SYNTAX_ERROR), result(Verdict.SYNTAX_ERROR, n=1), -1.0, -1.0),
        # parses, crashes: -0.5 (runs scores 0 either way)
        (None, result(Verdict.RUNTIME_ERROR), result(Verdict.RUNTIME_ERROR, n=1), -0.5, -0.5),
        # runs, fails the visible test: 0.0
        (None, result(Verdict.WRONG_ANSWER, 1), result(Verdict.WRONG_ANSWER, 0, n=1), 0.0, 0.0),
        # passes visible, 2/3 hidden: 0.5; dense: 0.5 + (1 - 0.5) * 2/3 = 0.8333
        (None, result(Verdict.WRONG_ANSWER, 2), result(Verdict.PASSED, 1, n=1), 0.5, 5 / 6),
        # passes everything: 1.0
        (None, result(Verdict.PASSED, 3), result(Verdict.PASSED, 1, n=1), 1.0, 1.0),
    ],
)
def test_hierarchy(program, hidden, visible, expected, dense_expected):
    kw = {"res": hidden, "visible_result": visible}
    s = sample(program, **kw) if program else sample(**kw)
    assert Hierarchy(LEVELS, base=-1.0)(s).score == pytest.approx(expected)
    assert Hierarchy(LEVELS, base=-1.0, dense=True)(s).score == pytest.approx(dense_expected)


def test_hierarchy_validates_and_bounds():
    with pytest.raises(ValueError, match="rise strictly"):
        Hierarchy((Level(SyntaxValid(), 1.0), Level(Runs(), 0.5)))
    assert Hierarchy(LEVELS, base=-1.0).bounds == (-1.0, 1.0)
    assert Hierarchy(LEVELS, base=-1.0).needs == {"hidden", "visible"}


def test_a_masked_child_masks_the_whole():
    masked = CallableReward(lambda s: RewardResult(0.0, masked=True, reason="infra"), name="m")
    r = WeightedSum(((1.0, const("a", 1.0)), (1.0, masked)))(sample())
    assert r.masked and r.score == 0.0 and r.reason == "infra"
    infra = result(Verdict.SANDBOX_ERROR)
    assert Hierarchy(LEVELS, base=-1.0)(sample(res=infra)).masked  # syntax ok, then runs masks
    # a program that does not parse stops at the first level: execution is never consulted
    stopped = Hierarchy(LEVELS, base=-1.0)(sample("def f(:\n", res=infra))
    assert not stopped.masked and stopped.score == -1.0
