"""pass@k against values computed by hand."""

from __future__ import annotations

import pytest

from execrl.eval.passk import mean_pass_at_k, pass_at_k


def test_pass_at_1_is_the_fraction_correct():
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)  # c / n


def test_hand_computed_values():
    # n=5, c=2, k=2: 1 - C(3,2)/C(5,2) = 1 - 3/10 = 0.7
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)
    # n=4, c=1, k=3: 1 - C(3,3)/C(4,3) = 1 - 1/4 = 0.75
    assert pass_at_k(4, 1, 3) == pytest.approx(0.75)
    # n=10, c=0: never
    assert pass_at_k(10, 0, 5) == 0.0
    # n - c < k: every draw of k contains a correct one
    assert pass_at_k(5, 4, 2) == 1.0


def test_stable_for_large_n():
    # n=200, c=1, k=100: 1 - C(199,100)/C(200,100) = 1 - 100/200 = 0.5 (binomials ~1e58)
    assert pass_at_k(200, 1, 100) == pytest.approx(0.5)


def test_mean_over_tasks():
    # tasks (n=2, c=1) and (n=2, c=2): pass@1 = (0.5 + 1) / 2
    assert mean_pass_at_k([(2, 1), (2, 2)], 1) == pytest.approx(0.75)


def test_invalid_arguments():
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)
    with pytest.raises(ValueError):
        mean_pass_at_k([], 1)
