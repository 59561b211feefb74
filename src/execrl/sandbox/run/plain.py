"""Plain data across the sandbox boundary: exact built-in types only, as tagged JSON.

The child encodes what the candidate returned; the trusted parent decodes it with `json` and
compares. The encoding is execrl's one tagged JSON (`execrl.tasks.values`) under its `SANDBOX`
limits: at most MAX_DEPTH deep and MAX_NODES parts, and a dict subclass (`collections.Counter`,
`OrderedDict`, `defaultdict`) as the plain dict of what it really stores, read with `dict.items`.

This module holds the checks the worker makes on values as they cross, without building
anything: whether a value is made of exact built-in types (`is_exact`), and in assert-style
tests, where the test code itself compares, the copy of a value holding a dict subclass in which
each is the plain dict it stores (`exact_copy`), so its own methods, perhaps lying, are never
seen by the tests.
"""

from __future__ import annotations

from execrl.tasks import values
from execrl.tasks.values import MAX_DEPTH, MAX_NODES, TOO_LARGE, NotPlainData

TYPE_CHECKING = False  # typing stays out of the worker
if TYPE_CHECKING:
    from typing import Any

_dict_items = dict.items  # bound at import, as `values`' own (run on private globals)


def is_scalar(x: Any) -> bool:
    t = type(x)
    return x is None or t is int or t is str or t is float or t is bool


def is_exact(value: Any) -> bool:
    """Whether `value` is made only of exact built-in data types (no dict subclass either)."""
    try:
        return _kind(value, 0, [MAX_NODES]) == 0
    except NotPlainData:
        return False


def exact_copy(value: Any) -> Any:
    """`value` itself if it is made of exact built-in types; if it holds a dict subclass, a copy
    in which each is the plain dict it stores (its own methods, perhaps lying, are never seen
    by the tests). Raises NotPlainData for anything else."""
    if _kind(value, 0, [MAX_NODES]) == 0:
        return value
    return values.from_json(values.to_json(value, values.SANDBOX))


def _kind(v: Any, depth: int, budget: list[int]) -> int:
    """0 for exact built-in data, 1 if it holds a dict subclass; the same types as `values`'
    encoder, checked without building anything (the harness checks every value that crosses)."""
    budget[0] -= 1
    if depth > MAX_DEPTH or budget[0] < 0:
        raise NotPlainData(TOO_LARGE)
    t = type(v)
    if v is None or t is bool or t is int or t is str or t is float:
        return 0
    if t is list or t is tuple or t is set or t is frozenset:
        kind = 0
        for x in v:
            tx = type(x)
            if tx is int or tx is str or tx is float or tx is bool or x is None:
                budget[0] -= 1  # the common leaves, without a call each
            else:
                kind |= _kind(x, depth + 1, budget)
        if budget[0] < 0:
            raise NotPlainData(TOO_LARGE)
        return kind
    if t is dict or issubclass(t, dict):  # the real type's ancestry, as in the encoder
        kind = 0 if t is dict else 1
        for k, x in _dict_items(v):
            kind |= _kind(k, depth + 1, budget) | _kind(x, depth + 1, budget)
        return kind
    if t is bytes or t is complex:
        return 0
    raise NotPlainData(f"returned a value of type {t.__name__!r}, which is not plain data")
