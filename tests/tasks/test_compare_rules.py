"""EvalPlus's comparison rules and problemtools' float tolerance, as compare.py applies them.
Expected verdicts worked out by hand from evalplus/eval/__init__.py (v0.3.x)."""

from __future__ import annotations

import math

import pytest

from execrl.sandbox.grading.compare import stdout_matches, values_equal
from execrl.tasks.schema import Compare

EP = Compare(oracle="evalplus")


@pytest.mark.parametrize(
    ("got", "expected", "cmp", "ok"),
    [
        (3, 3, EP, True),
        (1.0000001, 1.0, EP, True),  # atol 0 and a float expected: atol becomes 1e-6
        (1.00001, 1.0, EP, False),  # |diff| 1e-5 > 1e-6 + 1e-7 * 1
        ([1.0, 2.0000001], [1.0, 2.0], EP, True),
        ((1.0, 2.0000001), [1.0, 2.0], EP, False),  # allclose only after type(out) == type(exp)
        ([1.0], [1.0, 2.0], EP, False),
        (3.0000001, 3, EP, False),  # an int expected: exact comparison only
        ("a", 1.0, EP, False),  # np.allclose raises on a string: a failure
        (1.0001, 1.0, Compare(atol=1e-3, oracle="evalplus"), True),
        ((5, 4), (4, 5), Compare(oracle="evalplus_set"), True),
        ([4, 4, 5], (5, 4), Compare(oracle="evalplus_set"), True),
        (7, (4, 5), Compare(oracle="evalplus_set"), False),  # set(7) raises
        ("match", True, Compare(oracle="evalplus_not_none"), True),
        (None, True, Compare(oracle="evalplus_not_none"), False),
        (False, True, Compare(oracle="evalplus_not_none"), False),  # a bool is compared as is
        # find_zero: expected holds xs = [-6, 1] (x - 6... no: -6 + 1*x), root 6
        (6.0, [-6, 1], Compare(atol=1e-4, oracle="evalplus_poly_root"), True),
        (6.1, [-6, 1], Compare(atol=1e-4, oracle="evalplus_poly_root"), False),
        ("6", [-6, 1], Compare(atol=1e-4, oracle="evalplus_poly_root"), False),
        (10, (11, 10), Compare(oracle="evalplus_or_close"), True),  # |10 - 10| <= 0
        (12, (11, 10), Compare(oracle="evalplus_or_close"), False),
        (3, (4, 3), Compare(oracle="evalplus_or_equal"), True),
        (5, (4, 3), Compare(oracle="evalplus_or_equal"), False),
    ],
)
def test_evalplus_rules(got, expected, cmp, ok):
    assert values_equal(got, expected, cmp) is ok


def test_nan_is_never_equal_under_evalplus():
    # np.allclose's equal_nan is False, and nan == nan is False.
    assert not values_equal(math.nan, math.nan, EP)
    assert values_equal(math.nan, math.nan, Compare(atol=1e-6))  # execrl's own rule keeps NaN


def test_problemtools_tolerance_is_absolute_or_relative():
    either = Compare(atol=1e-6, rtol=1e-6, either_tolerance=True)
    summed = Compare(atol=1e-6, rtol=1e-6)
    # expected 1.0, got 1.0000015: absolute error 1.5e-6, relative 1.5e-6 -> fails problemtools,
    # passes the summed rule (1.5e-6 <= 1e-6 + 1e-6).
    assert not stdout_matches("Case #1: 1.0000015", "Case #1: 1.0", either)
    assert stdout_matches("Case #1: 1.0000015", "Case #1: 1.0", summed)
    # expected 1e6, got 1e6 + 0.5: relative error 5e-7 passes.
    assert stdout_matches("Case #1: 1000000.5", "Case #1: 1000000", either)
    assert not stdout_matches("Case #2: 1", "Case #1: 1", either)
