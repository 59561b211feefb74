"""Plain data across the sandbox boundary: exact built-in types only, as tagged JSON.

The child encodes what the candidate returned; the trusted parent decodes it with `json` and
compares. Pickle is never used: unpickling untrusted bytes runs code. A value of any type that is
not exactly a built-in data type (an `int` subclass, an object whose `__eq__` always answers True)
cannot be encoded, so it can never compare equal to an expected value.

The one exception is a dict subclass (`collections.Counter`, `OrderedDict`, `defaultdict`, which
correct solutions return and official harnesses accept since they compare equal to a dict): it
is encoded as the plain dict of what it really stores, read with `dict.items` (which no subclass
can override), so whatever its own `__eq__`, `items` or `__iter__` say is never consulted. In
assert-style tests, where the test code itself compares, `exact_copy` hands the tests that plain
dict instead of the subclass.
"""

from __future__ import annotations

import base64
import json
import math

TYPE_CHECKING = False  # typing stays out of the worker
if TYPE_CHECKING:
    from typing import Any

# Bound at import: the harness runs these functions on private globals after the candidate has
# run, so they must not look anything up on shared module objects the candidate could patch.
_isfinite = math.isfinite
_b64encode = base64.b64encode
_dict_items = dict.items
MAX_DEPTH = 64
MAX_NODES = 2_000_000


class NotPlainData(TypeError):
    """A value that is not made only of exact built-in data types."""


def encode(value: Any) -> str:
    return json.dumps(to_json(value), separators=(",", ":"), allow_nan=False)


def to_json(value: Any) -> Any:
    """The tagged-JSON structure of `value`; raises NotPlainData for anything else."""
    return _enc(value, 0, [MAX_NODES])


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
    return _dec(_enc(value, 0, [MAX_NODES]))


def _kind(v: Any, depth: int, budget: list[int]) -> int:
    """0 for exact built-in data, 1 if it holds a dict subclass; the same types as `_enc`,
    checked without building anything (the harness checks every value that crosses)."""
    budget[0] -= 1
    if depth > MAX_DEPTH or budget[0] < 0:
        raise NotPlainData("value too deep or too large to compare")
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
            raise NotPlainData("value too deep or too large to compare")
        return kind
    if t is dict or issubclass(t, dict):  # the real type's ancestry, as in `_enc`
        kind = 0 if t is dict else 1
        for k, x in _dict_items(v):
            kind |= _kind(k, depth + 1, budget) | _kind(x, depth + 1, budget)
        return kind
    if t is bytes or t is complex:
        return 0
    raise NotPlainData(f"returned a value of type {t.__name__!r}, which is not plain data")


def _enc(v: Any, depth: int, budget: list[int]) -> Any:
    budget[0] -= 1
    if depth > MAX_DEPTH or budget[0] < 0:
        raise NotPlainData("value too deep or too large to compare")
    t = type(v)
    if v is None or t is bool or t is int or t is str:
        return v
    if t is float:
        return v if _isfinite(v) else {"$f": repr(v)}
    if t is list:
        return [_enc(x, depth + 1, budget) for x in v]
    if t is tuple:
        return {"$t": [_enc(x, depth + 1, budget) for x in v]}
    if t is dict:
        return {
            "$d": [[_enc(k, depth + 1, budget), _enc(x, depth + 1, budget)] for k, x in v.items()]
        }
    if t is set or t is frozenset:
        return {"$s" if t is set else "$fs": [_enc(x, depth + 1, budget) for x in v]}
    if t is bytes:
        return {"$b": _b64encode(v).decode()}
    if t is complex:
        return {"$c": [_enc(v.real, depth + 1, budget), _enc(v.imag, depth + 1, budget)]}
    if issubclass(t, dict):  # the real type's ancestry: a faked __class__ cannot get here
        return {
            "$d": [
                [_enc(k, depth + 1, budget), _enc(x, depth + 1, budget)] for k, x in _dict_items(v)
            ]
        }
    raise NotPlainData(f"returned a value of type {t.__name__!r}, which is not plain data")


def decode(text: str) -> Any:
    return _dec(json.loads(text))


def _dec(v: Any) -> Any:
    if isinstance(v, list):
        return [_dec(x) for x in v]
    if not isinstance(v, dict):
        return v
    ((tag, body),) = v.items()
    if tag == "$t":
        return tuple(_dec(x) for x in body)
    if tag == "$d":
        return {_dec(k): _dec(x) for k, x in body}
    if tag == "$s":
        return {_dec(x) for x in body}
    if tag == "$fs":
        return frozenset(_dec(x) for x in body)
    if tag == "$f":
        return float(body)
    if tag == "$b":
        return base64.b64decode(body)
    if tag == "$c":
        return complex(_dec(body[0]), _dec(body[1]))
    raise ValueError(f"unknown plain-data tag {tag!r}")
