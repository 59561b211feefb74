"""Plain data (tuples, sets, bytes, complex, non-finite floats) as tagged JSON, for task files.

The same tags as `execrl.sandbox.plain` (a test pins the two together): a value written into a
task file reads back as exactly the value the sandbox would compare. Kept here because the
tasks layer may not import the sandbox.
"""

from __future__ import annotations

import base64
import math
from typing import Any


def to_json(v: Any) -> Any:
    t = type(v)
    if v is None or t is bool or t is int or t is str:
        return v
    if t is float:
        return v if math.isfinite(v) else {"$f": repr(v)}
    if t is list:
        return [to_json(x) for x in v]
    if t is tuple:
        return {"$t": [to_json(x) for x in v]}
    if t is dict:
        return {"$d": [[to_json(k), to_json(x)] for k, x in v.items()]}
    if t is set or t is frozenset:
        return {"$s" if t is set else "$fs": [to_json(x) for x in v]}
    if t is bytes:
        return {"$b": base64.b64encode(v).decode()}
    if t is complex:
        return {"$c": [to_json(v.real), to_json(v.imag)]}
    raise TypeError(f"a value of type {t.__name__!r} is not plain data and cannot be stored")


def from_json(v: Any) -> Any:
    if isinstance(v, list):
        return [from_json(x) for x in v]
    if not isinstance(v, dict):
        return v
    if len(v) != 1:
        raise ValueError(f"a tagged value must have exactly one key, got {sorted(v)}")
    ((tag, body),) = v.items()
    if tag == "$t":
        return tuple(from_json(x) for x in body)
    if tag == "$d":
        return {from_json(k): from_json(x) for k, x in body}
    if tag == "$s":
        return {from_json(x) for x in body}
    if tag == "$fs":
        return frozenset(from_json(x) for x in body)
    if tag == "$f":
        return float(body)
    if tag == "$b":
        return base64.b64decode(body)
    if tag == "$c":
        return complex(from_json(body[0]), from_json(body[1]))
    raise ValueError(f"unknown value tag {tag!r}")
