"""Trusted comparisons, run in the parent: the expected values never enter the sandbox.

Whatever a candidate returns, a comparison answers True or False and never raises: a value the
rules cannot compare (an integer past `float`'s range, past the 4,300 digits `repr` allows, a
nesting deeper than numpy's 64 dimensions) is a wrong answer, never a grading failure that would
mask the sample. Shapes are exact: EvalPlus's float check calls `np.allclose`, which broadcasts,
so there `[[]]` passes for `[1.5]` and `[[x], [x]]` for `[x, x]`; here the returned value must
have the expected value's shape first (a departure from EvalPlus, named in docs/benchmarks.md).
"""

from __future__ import annotations

import math
from typing import Any

from execrl.sandbox.grading import checkers
from execrl.tasks.schema import Compare


def values_equal(got: Any, expected: Any, cmp: Compare) -> bool:
    """Python's == on plain data, with float tolerance and order-insensitivity where asked.

    False, never an exception, for anything the rules cannot compare: the candidate chose `got`,
    and a comparison that raised would turn its wrong answer into a masked grading failure.
    """
    try:
        return _values_equal(got, expected, cmp)
    except Exception:  # noqa: BLE001 - RecursionError, OverflowError, ValueError, MemoryError...
        return False


def describe(value: Any, n: int = 200) -> str:
    """`repr(value)` cut to `n` characters, for verdict messages; never raises (an int past the
    4,300 digits `repr` allows is shown by its size)."""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a message must not fail the grading of a run
        text = _outline(value, 0)
    return text if len(text) <= n else text[: n - 3] + "..."


def _outline(value: Any, depth: int) -> str:
    if type(value) is int:
        return f"<int of {value.bit_length()} bits>"
    if depth < 8 and type(value) in (list, tuple) and len(value) <= 20:
        inner = ", ".join(_outline(v, depth + 1) for v in value)
        return f"[{inner}]" if type(value) is list else f"({inner})"
    try:
        return repr(value)
    except Exception:  # noqa: BLE001
        return f"<{type(value).__name__} value>"


def _values_equal(got: Any, expected: Any, cmp: Compare) -> bool:
    if cmp.checker:  # a benchmark's own rule (sandbox/grading/checkers.py)
        return checkers.value_check(got, expected, cmp)
    if cmp.oracle:
        return evalplus_equal(got, expected, cmp.oracle, cmp.atol)
    if cmp.unordered and type(got) in (list, tuple) and type(expected) in (list, tuple):
        if type(got) is not type(expected) or len(got) != len(expected):
            return False
        got, expected = sorted(got, key=_order_key), sorted(expected, key=_order_key)
        return all(
            _values_equal(g, e, Compare(cmp.atol, cmp.rtol))
            for g, e in zip(got, expected, strict=True)
        )
    if cmp.atol == 0 and cmp.rtol == 0:
        return got == expected
    return _close(got, expected, cmp.atol, cmp.rtol)


def _order_key(value: Any) -> str:
    """A sort key under which equal plain values sit at the same place; `repr` refuses ints
    past 4,300 digits, so those (and containers holding them) get a key of their own."""
    try:
        return repr(value)
    except ValueError:
        return "\x00" + _outline(value, 0) + hex(hash(_hashable(value)))


def _hashable(value: Any) -> Any:
    if type(value) in (list, tuple):
        return tuple(_hashable(v) for v in value)
    try:
        hash(value)
    except TypeError:
        return id(type(value))
    return value


def same_number(got: float, expected: float, tol: float) -> bool:
    """`got` within `tol` of `expected`, where a non-finite value matches only the same
    non-finite value: `abs(x - y) > tol` is False for NaN, so a test for a mismatch alone
    would let NaN match anything (and `inf - inf` is NaN). Every verifier compares through
    this."""
    if not (math.isfinite(got) and math.isfinite(expected)):
        return got == expected or (math.isnan(got) and math.isnan(expected))
    return abs(got - expected) <= tol


def _close(got: Any, expected: Any, atol: float, rtol: float) -> bool:
    if isinstance(expected, float) or isinstance(got, float):
        if type(got) not in (int, float) or type(expected) not in (int, float):
            return False
        return same_number(got, expected, atol + rtol * abs(expected))
    if type(got) in (list, tuple) and type(got) is type(expected):
        return len(got) == len(expected) and all(
            _close(g, e, atol, rtol) for g, e in zip(got, expected, strict=True)
        )
    if type(got) is dict and type(expected) is dict:
        return got.keys() == expected.keys() and all(
            _close(got[k], expected[k], atol, rtol) for k in got
        )
    return got == expected


def evalplus_equal(got: Any, expected: Any, oracle: str, atol: float) -> bool:
    """One input of EvalPlus's check (evalplus/eval/__init__.py, `unsafe_execute`, v0.3.x).

    Any exception in the check is a failure, as it is there. One departure: EvalPlus switches
    to atol=1e-6 for the rest of a run once it has seen a float expected value; here the switch
    applies to each float expected value alone (the grader sees one test at a time).
    """
    try:
        if oracle == "evalplus_poly_root":  # HumanEval/32: any root of the polynomial passes
            return bool(abs(_poly(expected, got)) <= atol)
        exact = got == expected
        if oracle == "evalplus_set":
            exact = set(got) == set(expected)
        elif oracle == "evalplus_not_none":
            exact = got == expected if type(got) is bool else expected == (got is not None)
        elif oracle in ("evalplus_or_close", "evalplus_or_equal"):
            expected, alternative = expected
            exact = got == expected
            if oracle == "evalplus_or_close":
                exact = exact or abs(got - alternative) <= atol
            else:
                exact = exact or got == alternative
        if atol == 0 and _is_floats(expected):
            atol = 1e-6
        if exact or atol == 0:
            return bool(exact)
        if type(got) is not type(expected):
            return False
        if isinstance(expected, (list, tuple)) and len(got) != len(expected):
            return False
        import numpy as np  # only the parent compares; the worker never imports this

        # np.allclose broadcasts: without this, [[]] passes for [1.5] (shapes (1, 0) and (1,)
        # broadcast to an empty array) and [[x], [x]] for [x, x]. EvalPlus has no such check.
        if np.shape(got) != np.shape(expected):
            return False
        return bool(np.allclose(got, expected, rtol=1e-07, atol=atol))
    except Exception:
        return False


def _is_floats(x: Any) -> bool:
    if isinstance(x, float):
        return True
    if isinstance(x, (list, tuple)) and x:
        return all(isinstance(i, float) for i in x)
    return False


def _poly(xs: list[Any], x: float) -> float:
    return sum(coeff * math.pow(x, i) for i, coeff in enumerate(xs))


def stdout_matches(got: str, expected: str, cmp: Compare) -> bool:
    """Token-by-token comparison of a program's output, as contest judges do; False, never an
    exception, for output a rule cannot read (as `values_equal`)."""
    try:
        return _stdout_matches(got, expected, cmp)
    except Exception:  # noqa: BLE001 - the program chose `got`: see values_equal
        return False


def _stdout_matches(got: str, expected: str, cmp: Compare) -> bool:
    if cmp.checker:  # a built-in checker or a benchmark's own rule (sandbox/grading/checkers.py)
        return checkers.stdout_check(got, expected, cmp)
    if not cmp.tokens:
        return got.rstrip("\n") == expected.rstrip("\n")
    a, b = got.split(), expected.split()
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x == y or (cmp.case_insensitive and x.lower() == y.lower()):
            continue
        if (cmp.atol or cmp.rtol) and _floats_close(x, y, cmp):
            continue
        return False
    return True


def _floats_close(x: str, y: str, cmp: Compare) -> bool:
    fx, fy = checkers.c_number(x), checkers.c_number(y)  # never Python-only `1_0` or `\u0661`
    if fx is None or fy is None:
        return False
    if not (math.isfinite(fx) and math.isfinite(fy)):
        return False
    if cmp.either_tolerance:  # problemtools: absolute or relative error within tolerance
        return abs(fx - fy) <= cmp.atol or abs(fx - fy) <= cmp.rtol * abs(fy)
    return abs(fx - fy) <= cmp.atol + cmp.rtol * abs(fy)
