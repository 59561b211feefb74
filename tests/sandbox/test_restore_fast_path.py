"""Attack class: fooling the restore's fast path (`dict_version`).

After each call into the candidate the harness skips every module, class and builtins dict whose
version tag has not moved since it last matched its snapshot, and compares the rest binding by
binding. A program that could make a tag read as unmoved after changing the dict would keep its
change through the tests: by patching what the tag is read with (`ctypes.c_uint64.value`, which
a patched class could answer from a stale memo), or by reaching the recorded tags and moving them
along. The program is wrong; it passes only if its `math.isclose`, planted during its first
call, is still there when the second test calls it."""

from __future__ import annotations

import pytest

from execrl.sandbox import Job, Verdict
from execrl.sandbox.run import dict_version
from execrl.tasks.schema import AssertTests

HIDE_THE_CHANGE = """
import ctypes, math, sys

real = ctypes._SimpleCData.__dict__["value"].__get__
memo = {}
# Any tag read through the class answers what it read first: a changed dict reads as unmoved.
ctypes.c_uint64.value = property(lambda self: memo.setdefault(id(self), real(self)))

recorded, seen = [], set()

def visit(obj, depth):
    # [tag reader, tag] pairs reachable from the modules, functions' globals and closures
    if depth > 5 or id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, list) and len(obj) == 2 and type(obj[0]) is ctypes.c_uint64:
        recorded.append(obj)
    elif isinstance(obj, dict):
        for value in list(obj.values()):
            visit(value, depth + 1)
    elif isinstance(obj, (list, tuple)):
        for value in list(obj):
            visit(value, depth + 1)
    elif type(obj).__name__ == "function":
        visit(obj.__globals__, depth + 1)
        for cell in obj.__closure__ or ():
            try:
                visit(cell.cell_contents, depth + 1)
            except ValueError:
                pass
    elif type(obj).__name__ == "module":
        visit(vars(obj), depth + 1)

for module in list(sys.modules.values()):
    visit(module, 0)

def f(x):
    math.isclose = lambda *args, **kwargs: True
    for pair in recorded:  # the tag as it now reads: "unchanged since the snapshot"
        pair[1] = real(pair[0])
    return x
"""


def test_a_module_change_is_undone_however_the_program_bends_the_tag_reads(sandbox):
    tests = AssertTests(
        "import math", ("assert candidate(1) == 1", "assert math.isclose(candidate(2), 5.0)")
    )
    result = sandbox.run(Job(HIDE_THE_CHANGE, tests, entry_point="f"))
    assert result.verdict is not Verdict.PASSED, result.message
    assert "modified module math" in result.tampering


CHANGES = {
    "set": lambda d: d.__setitem__("k", object()),
    "delete": lambda d: d.__delitem__("k"),
    "pop": lambda d: d.pop("k"),
    "popitem": lambda d: d.popitem(),
    "setdefault": lambda d: d.setdefault("new", 1),
    "update": lambda d: d.update(k=2),
    "clear": lambda d: d.clear(),
    "ior": lambda d: d.__ior__({"k": 3}),
}


@pytest.mark.skipif(not dict_version.WORKS, reason="no readable dict version tags here")
@pytest.mark.parametrize("change", sorted(CHANGES))
def test_every_change_to_a_dict_moves_its_tag(change):
    d = {"k": 1, "j": 2}
    seen = dict_version.watch(d)
    assert seen is not None
    CHANGES[change](d)
    assert dict_version.read(seen[0]) != seen[1]


@pytest.mark.skipif(not dict_version.WORKS, reason="no readable dict version tags here")
def test_a_class_s_tag_moves_with_its_attributes():
    class Thing:
        size = 1

    seen = dict_version.watch(vars(Thing))
    assert seen is not None
    Thing.size = 1  # the same value: no change
    assert dict_version.read(seen[0]) == seen[1]
    Thing.size = 2
    assert dict_version.read(seen[0]) != seen[1]
