"""A dict's version tag (PEP 509), read without touching its contents: the restore's fast path.

After every call into the candidate the harness checks that the modules the tests use, their
classes and the builtins still hold what they held (`restorer.make_restore`): by identity, binding by
binding, some 60 dicts and thousands of bindings a call on HumanEval. Walking a dict's values
writes each value's reference count, and in a forked run every page written is copied first;
that walk was a tenth of a run's CPU. CPython gives every dict a version tag, which it sets from
a global counter, never an old value, whenever the dict changes (an insert, a delete, a new value
for a key, a clear) and leaves alone otherwise (`d[k] = d[k]`). So the restore reads the tag
first: the same tag as when the dict last matched its snapshot means the same bindings, and only
a dict whose tag moved is compared binding by binding, as before.

The tag is read at the dict's address through a ctypes object made before the candidate runs,
with the C getter of `_SimpleCData.value` bound here (a patched `ctypes` class changes nothing);
reading it raises no audit event, and the objects are reachable only from the harness's
closures, as the run's key is. Where the interpreter does not keep the tag where this reads it
(another implementation or version: `_works` checks it), `watch` returns None and every dict is
compared in full.
"""

from __future__ import annotations

import ctypes
import gc
import sys

TYPE_CHECKING = False  # typing stays out of the worker
if TYPE_CHECKING:
    from typing import Any

# PyDictObject: ob_refcnt, ob_type, ma_used, then the 64-bit ma_version_tag.
_OFFSET = 3 * ctypes.sizeof(ctypes.c_ssize_t)
read = ctypes._SimpleCData.__dict__["value"].__get__


def _at(d: dict[Any, Any]) -> Any:
    return ctypes.c_uint64.from_address(id(d) + _OFFSET)


def _works() -> bool:
    """Whether the tag is where `_at` reads it and moves as PEP 509 says, on this interpreter."""
    if sys.implementation.name != "cpython" or ctypes.sizeof(ctypes.c_ssize_t) != 8:
        return False
    probe: dict[str, Any] = {"k": 0}
    tag = _at(probe)
    seen = [read(tag)]
    for change in (lambda: probe.update(k=1), lambda: probe.pop("k"), probe.clear):
        probe["k"] = seen  # a change of its own, then the one under test
        before = read(tag)
        change()
        seen.append(read(tag))
        if seen[-1] == before:
            return False
    probe["k"] = seen
    same = read(tag)
    probe["k"] = seen  # the same value again: no change
    return read(tag) == same and len(set(seen)) == len(seen)


WORKS = _works()


def watch(d: Any) -> list[Any] | None:
    """[the tag's reader, the tag when `d` last matched its snapshot], for a dict or a class's
    mappingproxy (its dict is the proxy's one referent); None where tags cannot be read. Made
    before the candidate runs: `gc.get_referents` and ctypes raise audit events."""
    if not WORKS:
        return None
    if type(d) is not dict:
        inner = gc.get_referents(d)
        if len(inner) != 1 or type(inner[0]) is not dict:
            return None
        d = inner[0]
    tag = _at(d)
    return [tag, read(tag)]
