"""Plain-data encoding and the trusted comparisons (hand-derived expectations)."""

from __future__ import annotations

import math

import pytest

from execrl.sandbox.grading.compare import stdout_matches, values_equal
from execrl.tasks import Compare, values


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        0,
        -(10**40),
        1.5,
        -0.0,
        "é\n",
        [1, [2]],
        (1, (2,)),
        {1: "a", (2, 3): [4]},
        {1, 2},
        frozenset({3}),
        b"\x00\xff",
        1 + 2j,
    ],
)
def test_round_trip(value):
    back = values.loads(values.encode(value))
    assert back == value and type(back) is type(value)


def test_special_floats_round_trip():
    assert math.isnan(values.loads(values.encode(float("nan"))))
    assert values.loads(values.encode([float("inf"), float("-inf")])) == [math.inf, -math.inf]


def test_non_plain_values_are_refused():
    class Liar(int):
        def __eq__(self, other):
            return True

    for bad in (Liar(1), [Liar(1)], {"k": object()}, iter([1]), print):
        with pytest.raises(values.NotPlainData):
            values.encode(bad)


def test_cycles_and_huge_values_are_refused():
    x: list = []
    x.append(x)
    with pytest.raises(values.NotPlainData):
        values.encode(x)


def test_values_equal_follows_python_equality():
    exact = Compare()
    assert values_equal(1, 1.0, exact)  # Python: 1 == 1.0
    assert not values_equal([1], (1,), exact)  # list != tuple
    assert not values_equal(0.1 + 0.2, 0.3, exact)
    assert values_equal(0.1 + 0.2, 0.3, Compare(atol=1e-9))
    # atol + rtol*|expected|: |100.5 - 100| = 0.5 <= 0 + 0.01 * 100 = 1.0
    assert values_equal(100.5, 100.0, Compare(rtol=0.01))
    assert not values_equal(102.0, 100.0, Compare(rtol=0.01))
    assert values_equal([3, 1, 2], [1, 2, 3], Compare(unordered=True))
    assert not values_equal([3, 1], [1, 2], Compare(unordered=True))
    assert not values_equal("1.0", 1.0, Compare(atol=1))


def test_stdout_matches_tokens():
    assert stdout_matches("Case #1: 3\n", "Case #1:   3", Compare())
    assert not stdout_matches("Case #1: 3 4", "Case #1: 3", Compare())
    assert stdout_matches("case #1: YES", "Case #1: yes", Compare(case_insensitive=True))
    assert not stdout_matches("Case #1: 0.333", "Case #1: 0.3333333", Compare())
    # |0.333 - 0.3333333| = 3.3e-4 <= 1e-3
    assert stdout_matches("Case #1: 0.333", "Case #1: 0.3333333", Compare(atol=1e-3))
    assert stdout_matches("a b\n", "a b", Compare(tokens=False))
    assert not stdout_matches("a  b", "a b", Compare(tokens=False))


def test_dict_subclasses_travel_as_what_they_really_store():
    from collections import Counter, OrderedDict, defaultdict

    assert values.loads(values.encode(Counter("aab"))) == {"a": 2, "b": 1}
    assert type(values.loads(values.encode(OrderedDict(x=1)))) is dict
    assert values.loads(values.encode(defaultdict(int, k=[1]))) == {"k": [1]}

    class Liar(dict):  # claims other contents and equality with anything
        def items(self):
            return [("a", 1)]

        def __iter__(self):
            return iter(["a"])

        def __eq__(self, other):
            return True

    assert values.loads(values.encode(Liar(z=0))) == {"z": 0}
