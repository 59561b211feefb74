"""Trusted comparisons, run in the parent: the expected values never enter the sandbox."""

from __future__ import annotations

import math
from typing import Any

from execrl.tasks.schema import Compare


def values_equal(got: Any, expected: Any, cmp: Compare) -> bool:
    """Python's == on plain data, with float tolerance and order-insensitivity where asked."""
    if cmp.unordered and type(got) in (list, tuple) and type(expected) in (list, tuple):
        if type(got) is not type(expected) or len(got) != len(expected):
            return False
        got, expected = sorted(got, key=repr), sorted(expected, key=repr)
        return all(
            values_equal(g, e, Compare(cmp.atol, cmp.rtol))
            for g, e in zip(got, expected, strict=True)
        )
    if cmp.atol == 0 and cmp.rtol == 0:
        return got == expected
    return _close(got, expected, cmp.atol, cmp.rtol)


def _close(got: Any, expected: Any, atol: float, rtol: float) -> bool:
    if isinstance(expected, float) or isinstance(got, float):
        if type(got) not in (int, float) or type(expected) not in (int, float):
            return False
        if math.isnan(expected) or math.isnan(got):
            return math.isnan(expected) and math.isnan(got)
        return abs(got - expected) <= atol + rtol * abs(expected)
    if type(got) in (list, tuple) and type(got) is type(expected):
        return len(got) == len(expected) and all(
            _close(g, e, atol, rtol) for g, e in zip(got, expected, strict=True)
        )
    if type(got) is dict and type(expected) is dict:
        return got.keys() == expected.keys() and all(
            _close(got[k], expected[k], atol, rtol) for k in got
        )
    return got == expected


def stdout_matches(got: str, expected: str, cmp: Compare) -> bool:
    """Token-by-token comparison of a program's output, as contest judges do."""
    if not cmp.tokens:
        return got.rstrip("\n") == expected.rstrip("\n")
    a, b = got.split(), expected.split()
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x == y or (cmp.case_insensitive and x.lower() == y.lower()):
            continue
        if (cmp.atol or cmp.rtol) and _floats_close(x, y, cmp.atol, cmp.rtol):
            continue
        return False
    return True


def _floats_close(x: str, y: str, atol: float, rtol: float) -> bool:
    try:
        fx, fy = float(x), float(y)
    except ValueError:
        return False
    if not (math.isfinite(fx) and math.isfinite(fy)):
        return False
    return abs(fx - fy) <= atol + rtol * abs(fy)
