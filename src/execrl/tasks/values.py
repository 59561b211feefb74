"""Plain data (tuples, sets, bytes, complex, non-finite floats) as tagged JSON, for task files.

The same tags as `execrl.sandbox.run.plain` (a test pins the two together): a value written into a
task file reads back as exactly the value the sandbox would compare. Kept here because the
tasks layer may not import the sandbox.
"""

from __future__ import annotations

import base64
import json
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
