"""Putting back what a call into the candidate may have changed in the modules the tests use
(`make_restore`), and the snapshots and comparisons that tell what changed. Run, like `guard`,
on private copies of its globals (`prepared._privatize`).

After each call into the candidate, the modules the tests import or use, every module reachable
from those (`re._compiler`, `json.decoder`, `_strptime` behind `datetime`), their classes,
and the builtins are put back as they were, and so is the import system (finders, path hooks,
the path, the importer cache); modules first imported while the candidate could act are
dropped from `sys.modules`, so the tests import them afresh. What had to be undone is
reported, and a run that bent any of it does not pass (`grade`). What the tests themselves
changed between calls (KodCode's tests point `sys.stdout` at a buffer or a file to read what
the program prints) is theirs: as a call begins, with no candidate code run since the last
restore, a module whose changes are all plain data, output buffers, files or values it held at
the start is taken as it is now, and the restore after the call puts that back
(`tests_may_set`).
"""

from __future__ import annotations

import builtins
import importlib
import io
import sys
import types
from operator import is_  # bound here: the candidate may patch `operator`

from execrl.sandbox.run import dict_version, plain

TYPE_CHECKING = False  # typing stays out of the worker
if TYPE_CHECKING:
    from typing import Any

HEAPTYPE = 1 << 9  # a class's flag: defined in Python, so its attributes can be set


def class_snapshots(mod: types.ModuleType, name: str) -> list[tuple[Any, ...]]:
    """The pure-Python classes a module defines, with their attributes, the fingerprint of
    those and their dict's version tag (`dict_version.watch`), for restoring."""
    out = []
    for value in list(vars(mod).values()):
        if isinstance(value, type) and value.__module__ == name and value.__flags__ & HEAPTYPE:
            proxy = vars(value)
            seen = dict_version.watch(proxy)
            snap = dict(proxy)
            out.append((value, snap, *fingerprint(snap), seen))
    return out


def module_snapshot(mod: types.ModuleType) -> tuple[dict[str, Any], Any, Any, Any]:
    """A module's bindings, their fingerprint and its dict's version tag, for restoring."""
    seen = dict_version.watch(mod.__dict__)
    snap = dict(mod.__dict__)
    return (snap, *fingerprint(snap), seen)


def differs(d: Any, keys: tuple[Any, ...], values: tuple[Any, ...]) -> bool:
    """Whether a dict (or a class's mappingproxy) is no longer what `fingerprint` saw. Identity,
    never ==: comparing would call a planted object's __eq__. In C (map over operator.is_), as it
    runs after every call into the candidate over every binding of every module the tests use;
    a key deleted and added again moves, and is seen too."""
    return (
        len(d) != len(keys) or not all(map(is_, d.values(), values)) or not all(map(is_, d, keys))
    )


def make_restore(unit: dict[str, Any], state: dict[str, Any]) -> Any:
    """The function that restores the modules the tests import, their classes, and builtins.

    The harness itself needs none of this (its globals are private); tests that import nothing
    get a restore that does nothing. What a restore had to undo is recorded as tampering. A dict
    whose version tag has not moved since it last matched is not walked (`dict_version`)."""
    names = module_closure(unit.get("imports") or ())
    state["real_modules"] = {}
    state["rebase"] = _nothing
    if not names:
        return _nothing
    tables, classes, entries = _snapshots(names, state)
    # Bound now: the candidate may replace the builtins.
    len_, range_, vars_, list_ = len, range, vars, list
    setattr_, delattr_, type_name_, text_ = type.__setattr__, type.__delattr__, type_name, text
    sysmods, tampered = sys.modules, state["tampered"]
    # Modules first imported after this point are the candidate's (or were imported while its
    # code could act): dropped after each call, so that what the tests import is loaded afresh,
    # never a module it imported and then patched (or planted: `sys.modules['_strptime']`).
    known = frozenset(sysmods)
    # The import system: a finder planted here would serve the modules stdlib code imports
    # lazily while the tests run. Honest code extends sys.path, so that is put back unreported.
    import_lists = [
        (sys.meta_path, list_(sys.meta_path), "sys.meta_path"),
        (sys.path_hooks, list_(sys.path_hooks), "sys.path_hooks"),
        (sys.path, list_(sys.path), None),
    ]
    importer_cache, importer_snap = sys.path_importer_cache, dict(sys.path_importer_cache)
    importer_print = fingerprint(importer_snap)
    changed, read_tag = differs, dict_version.read
    moved = _make_moved()
    state["rebase"] = _make_rebase(tables, moved)

    def restore() -> None:
        for name, mod in entries:
            if sysmods.get(name) is not mod:
                sysmods[name] = mod
                tampered.append(f"replaced module {name}")
        for name in sysmods.keys() - known:
            del sysmods[name]
        for current, snap, name in import_lists:
            if len_(current) != len_(snap) or not all(map(is_, current, snap)):
                current[:] = snap
                if name is not None:
                    tampered.append(f"modified {name}")
        if changed(importer_cache, *importer_print):
            importer_cache.clear()
            importer_cache.update(importer_snap)
        for _ in range_(2):  # a planted __del__ may run while a table is cleared; go once more
            dirty = False
            for name, d, snap, keys, values, seen in tables:
                if moved(d, keys, values, seen):
                    dirty = True
                    tampered.append(f"modified module {name}")
                    d.clear()
                    d.update(snap)
            for cls, snap, keys, values, seen in classes:
                if seen is not None and read_tag(seen[0]) == seen[1]:
                    continue
                current = vars_(cls)
                if moved(current, keys, values, seen):
                    dirty = True
                    tampered.append(f"modified class {text_(type_name_(cls))}")
                    for key in list_(current):
                        if key not in snap:
                            delattr_(cls, key)
                    for key, value in snap.items():
                        if current.get(key) is not value:
                            setattr_(cls, key, value)
            if not dirty:
                return

    return restore


def _snapshots(
    names: list[str], state: dict[str, Any]
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], list[tuple[str, types.ModuleType]]]:
    """The restore's tables (name, dict, snapshot, keys, values, [tag reader, tag] or None),
    the builtins' first, its classes' snapshots, and the modules by name: the worker's where
    it took them, taken here (still before the candidate runs) for the others."""
    parts = state["p"]
    tables = [("builtins", builtins.__dict__, *parts["builtins_snapshot"])]
    classes: list[tuple[Any, ...]] = []
    entries: list[tuple[str, types.ModuleType]] = []
    for name in names:
        if name == "builtins":  # in `tables` already
            continue
        # `sys` is snapshotted here: the harness set its streams after the worker's snapshot.
        if name in parts["modules"] and name != "sys":
            mod, *snapshot = parts["modules"][name]
            cls_snaps = parts["classes"][name]
        else:  # not prepared in the worker: snapshot it here, still before the candidate runs
            mod = sys.modules[name]
            snapshot, cls_snaps = module_snapshot(mod), class_snapshots(mod, name)
            state["extra_globals"].add(id(mod.__dict__))
        entries.append((name, mod))
        state["real_modules"][name] = mod
        tables.append((name, mod.__dict__, *snapshot))
        classes.extend(cls_snaps)
    return tables, classes, entries


def _make_moved() -> Any:
    changed, read_tag = differs, dict_version.read

    def moved(d: Any, keys: Any, values: Any, seen: list[Any] | None) -> bool:
        """`differs`, asked only of a dict whose version tag moved since it last matched."""
        if seen is None:
            return changed(d, keys, values)
        tag = read_tag(seen[0])
        if tag == seen[1]:
            return False
        if changed(d, keys, values):
            return True
        seen[1] = tag  # changed and changed back (a test's `x = x`): the same bindings
        return False

    return moved


def _make_rebase(tables: list[tuple[Any, ...]], moved: Any) -> Any:
    read_tag = dict_version.read
    # What each table held when the run began: a test putting one of these back is no change.
    # Taken when first needed: a walk over every value, which most runs never need.
    first_snaps = [snap for _, _, snap, _, _, _ in tables]
    originals: list[frozenset[int] | None] = [None] * len(tables)

    def rebase() -> None:
        """Called as a call into the candidate begins, when no candidate code can have run since
        the last restore: what the tests changed since is theirs (KodCode's tests point
        `sys.stdout` at a buffer), and becomes what the restore puts back. Updates `tables`
        in place, which the restore reads."""
        for i, (name, d, snap, keys, values, seen) in enumerate(tables):
            if not moved(d, keys, values, seen):
                continue
            if originals[i] is None:
                originals[i] = frozenset(map(id, first_snaps[i].values()))
            if tests_may_set(d, snap, originals[i]):
                tag = [seen[0], read_tag(seen[0])] if seen is not None else None
                now = dict(d)
                tables[i] = (name, d, now, *fingerprint(now), tag)

    return rebase


# Standard modules that others import only when a function of theirs is first called (from C,
# so no module attribute leads to them): snapshotted with those others where already loaded.
LAZY_DEPENDENCIES = {"datetime": ("_strptime",), "time": ("_strptime",)}


def module_closure(imports: Any) -> list[str]:
    """The modules `imports` name (imported now, before the candidate runs), their parent
    packages (`import os.path` binds `os`, and reads `path` off it), and every module reachable
    from those through module attributes (`re` uses `re._compiler`, `json` `json.decoder`):
    a test that calls `re.match` runs their code too. Modules that fail to import are left to
    the test code, which reports the failure itself."""
    todo = [".".join(n.split(".")[:k]) for n in imports for k in range(1, n.count(".") + 2)]
    seen: dict[str, None] = {}
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        mod = sys.modules.get(name)
        if mod is None:
            try:
                mod = importlib.import_module(name)
            except Exception:  # noqa: BLE001
                continue
        seen[name] = None
        for value in list(vars(mod).values()):
            if type(value) is types.ModuleType and sys.modules.get(value.__name__) is value:
                todo.append(value.__name__)
        todo.extend(n for n in LAZY_DEPENDENCIES.get(name, ()) if n in sys.modules)
    return list(seen)


# Values a test may bind in a module it uses without it counting as the program's tampering:
# buffers to capture output into (they hold text or bytes, never code).
_BUFFERS = (io.StringIO, io.BytesIO)
# Bound here, as every class these checks compare with: the candidate may patch `io`.
_TEXT_FILE, _BUFFERED_FILES, _RAW_FILE = (
    io.TextIOWrapper,
    (io.BufferedWriter, io.BufferedReader, io.BufferedRandom),
    io.FileIO,
)


def tests_may_set(d: dict[str, Any], snap: dict[str, Any], originals: frozenset[int]) -> bool:
    """Whether every change from `snap` to `d` is one the tests may make: no binding removed,
    and each new value plain data, an output buffer or file (`_is_file`), or a value the module
    held at the start (`sys.stdout = sys.__stdout__`). Anything else (a function, an object of
    a class some code defined) stays a change the restore undoes and reports."""
    for key, value in d.items():
        old = snap.get(key, _nothing)
        if old is value or id(value) in originals:
            continue
        if not _is_buffer(value) and not _is_file(value) and not plain.is_exact(value):
            return False
    return all(key in d for key in snap)


def _is_buffer(value: Any) -> bool:
    # By identity: `in` would call the == of a metaclass of the candidate's.
    cls = type(value)
    return any(cls is buffer for buffer in _BUFFERS)


def _is_file(value: Any) -> bool:
    """A file as `open()` makes it (KodCode's tests point `sys.stdout` at one they opened):
    io's own classes, exactly, down to the descriptor, so writing to it runs no Python code.
    Their `buffer` and `raw` are members of C types: reading them runs none either."""
    if type(value) is _TEXT_FILE:
        value = value.buffer
    cls = type(value)
    if any(cls is buffered for buffered in _BUFFERED_FILES):
        value = value.raw
    return type(value) is _RAW_FILE


def fingerprint(snap: dict[str, Any]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """A dict's keys and values, in order, for `differs`."""
    return tuple(snap), tuple(snap.values())


def _nothing() -> None:
    return None


# Unbound descriptors: a candidate's class cannot override them with properties.
type_name = type.__dict__["__name__"].__get__
# A name as an exact string: a class's or a function's name may be a str subclass of the
# candidate's, whose own __format__ would run where the name is formatted.
text = str.__str__
