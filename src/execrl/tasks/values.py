"""Plain data as tagged JSON: execrl's one encoder of values and its decoder.

Tuples, dicts (any keys), sets, frozensets, bytes, complex numbers and non-finite floats are
tagged objects (`{"$t": [...]}`, `{"$d": [[k, v], ...]}`, `{"$s": ...}`, `{"$fs": ...}`,
`{"$b": base64}`, `{"$c": [re, im]}`, `{"$f": "nan"}`); None, booleans, ints, strings, finite
floats and lists are themselves. Only exact built-in data types are encoded: anything else (an
`int` subclass, an object whose `__eq__` always answers True) raises `NotPlainData`, so it can
never compare equal to an expected value. Pickle is never used: unpickling untrusted bytes runs
code.

Three users, each with its `Limits` (how deep, how many parts, how a dict subclass is read):

- task files and what they cache (`jsonl`, `evalplus`): `STORED`, any size, exact types only;
- the sandbox (`execrl.sandbox.run.plain`, its worker and the trusted parent): `SANDBOX`, at most
  MAX_DEPTH deep and MAX_NODES parts, and a dict subclass (`collections.Counter`, `OrderedDict`,
  `defaultdict`, which correct solutions return and official harnesses accept since they compare
  equal to a dict) as the plain dict it really stores, read with `dict.items` (which no subclass
  can override), so whatever its own `__eq__`, `items` or `__iter__` say is never consulted. The
  worker runs these functions on private globals (`sandbox.run.prepared`), after the candidate
  has run: they look nothing up on shared module objects the candidate could patch;
- EvalPlus's reference driver (`reference_runs.DRIVER`), which ships this file's text with each
  run and encodes the reference's outputs as EvalPlus compares them.
"""

from __future__ import annotations

import base64
import json
import math

TYPE_CHECKING = False  # typing stays out of the sandbox's worker
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    # (max_depth, max_nodes, how a dict subclass's pairs are read: None refuses one)
    Limits = tuple[int, int, Callable[[Any], Any] | None]

# Bound at import: the harness runs these functions on private globals after the candidate has
# run, so they must not look anything up on shared module objects the candidate could patch.
_isfinite = math.isfinite
_b64encode = base64.b64encode
_dict_items = dict.items
MAX_DEPTH = 64
MAX_NODES = 2_000_000
UNBOUNDED = 1 << 62
TOO_LARGE = "value too deep or too large to compare"
STORED: Limits = (UNBOUNDED, UNBOUNDED, None)
SANDBOX: Limits = (MAX_DEPTH, MAX_NODES, _dict_items)


class NotPlainData(TypeError):
    """A value that is not made only of exact built-in data types."""


def to_json(value: Any, limits: Limits = STORED) -> Any:
    """The tagged-JSON structure of `value`; NotPlainData for anything else, or (`TOO_LARGE`) for
    a value deeper or of more parts than `limits` allow."""
    max_depth, max_nodes, subclass_items = limits
    return _enc(value, 0, [max_nodes, max_depth, subclass_items])


def encode(value: Any) -> str:
    """`value` as the sandbox sends it: compact tagged JSON within `SANDBOX`'s limits."""
    return json.dumps(to_json(value, SANDBOX), separators=(",", ":"), allow_nan=False)


def _enc(v: Any, depth: int, limits: list[Any]) -> Any:
    limits[0] -= 1
    if depth > limits[1] or limits[0] < 0:
        raise NotPlainData(TOO_LARGE)
    t = type(v)
    if v is None or t is bool or t is int or t is str:
        return v
    if t is float:
        return v if _isfinite(v) else {"$f": repr(v)}
    if t is list:
        return [_enc(x, depth + 1, limits) for x in v]
    if t is tuple:
        return {"$t": [_enc(x, depth + 1, limits) for x in v]}
    if t is dict:
        return {
            "$d": [[_enc(k, depth + 1, limits), _enc(x, depth + 1, limits)] for k, x in v.items()]
        }
    if t is set or t is frozenset:
        return {"$s" if t is set else "$fs": [_enc(x, depth + 1, limits) for x in v]}
    if t is bytes:
        return {"$b": _b64encode(v).decode()}
    if t is complex:
        return {"$c": [_enc(v.real, depth + 1, limits), _enc(v.imag, depth + 1, limits)]}
    # the real type's ancestry: a faked __class__ cannot get here
    if issubclass(t, dict) and limits[2] is not None:
        items = limits[2]
        return {
            "$d": [[_enc(k, depth + 1, limits), _enc(x, depth + 1, limits)] for k, x in items(v)]
        }
    raise NotPlainData(f"returned a value of type {t.__name__!r}, which is not plain data")


def from_json(v: Any) -> Any:
    """The value a tagged-JSON structure stands for; ValueError (or TypeError) for a malformed
    one."""
    if isinstance(v, list):
        return [from_json(x) for x in v]
    if not isinstance(v, dict):
        return v
    return _untag({tag: from_json(body) for tag, body in v.items()})


def _untag(d: dict[str, Any]) -> Any:
    """One tagged object whose body is decoded already."""
    if len(d) != 1:
        raise ValueError(f"a tagged value must have exactly one key, got {sorted(d)}")
    ((tag, body),) = d.items()
    if tag == "$t":
        return tuple(body)
    if tag == "$d":
        return {k: x for k, x in body}
    if tag == "$s":
        return set(body)
    if tag == "$fs":
        return frozenset(body)
    if tag == "$f":
        return float(body)
    if tag == "$b":
        return base64.b64decode(body)
    if tag == "$c":
        return complex(body[0], body[1])
    raise ValueError(f"unknown value tag {tag!r}")


def loads(text: str) -> Any:
    """`from_json(json.loads(text))`, with lists and scalars left to json's C decoder: only the
    tagged objects (decoded innermost first) reach Python code, which reads the tens of
    megabytes of an EvalPlus expected output about a third faster."""
    return json.loads(text, object_hook=_untag)
