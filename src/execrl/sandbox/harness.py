"""The trusted harness that runs inside each sandboxed child, next to the candidate program.

The harness reports through its own channel (a pipe the worker reads), every message prefixed
with a per-run random token that lives only in this function's locals. Once the candidate runs,
an audit hook denies the ways Python code could reach that token or bend the tests: frame and
traceback introspection, the garbage collector's object lists, trace and profile hooks, ctypes,
reading the process's own memory, and changing attributes of classes and functions the
candidate did not define. Before the tests run, the builtins and the standard modules that the
test code uses are restored from a snapshot taken before the candidate ran, and restored again
after every call into the candidate. Values the candidate returns must be plain data.

Nothing here decides a verdict: the worker and the trusted parent do that from these messages,
and a run that did not say "done" after its last test never passes.
"""

from __future__ import annotations

import builtins
import importlib
import io
import os
import re
import resource
import signal
import sys
import time
import types

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the worker 2 MB
if TYPE_CHECKING:
    from typing import Any

from execrl.sandbox import plain

CANDIDATE_FILE = "<candidate>"
TESTS_FILE = "<tests>"
MAX_MESSAGE = 2000  # characters of an exception message kept

_DENIED_EVENTS = frozenset(
    {
        "sys._getframe",
        "sys._current_frames",
        "sys._current_exceptions",
        "sys.settrace",
        "sys.setprofile",
        "sys.addaudithook",
        "sys.monitoring.register_callback",
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
        "object.__getattr__",  # tb_frame, f_code, gi_frame, cr_frame, ...: the way to frames
        "code.__new__",  # hand-made bytecode can read arbitrary memory
        "marshal.load",
        "marshal.loads",
    }
)
# A thread of the candidate could re-patch a module between a restore and a report; threads are
# denied unless the task allows them.
_THREAD_EVENT = "_thread.start_new_thread"
# Modules whose globals the harness's own code reads after the candidate has run: restored
# before every report. Everything else it calls after that point is bound in `prepare`.
_HARNESS_MODULES = ("execrl.sandbox.harness", "execrl.sandbox.plain", "math", "base64", "binascii")
_PROC_MEMORY = re.compile(r"^/proc/(self|thread-self|\d+)(/task/\d+)?/(mem|pagemap|map_files)")


class Prepared:
    """Built once in the worker, before any fork: children inherit it without touching it.

    Copying module dictionaries in each child would touch every object they hold and fault in
    a private copy of its page; snapshots taken here are shared copy-on-write instead."""

    __slots__ = (
        "builtins",
        "modules",
        "encode_json",
        "write",
        "exit",
        "kill",
        "setrlimit",
        "clock",
        "nproc",
        "sigkill",
        "protected_types",
        "protected_globals",
    )

    def __init__(self, protect: list[str]) -> None:
        import _json

        self.builtins = dict(builtins.__dict__)
        self.modules: dict[str, tuple[types.ModuleType, dict[str, Any]]] = {}
        for name in sorted(set(protect) | set(_HARNESS_MODULES)):
            try:
                mod = importlib.import_module(name)
            except ImportError:
                continue
            self.modules[name] = (mod, dict(mod.__dict__))
        # The C encoder reads no module globals, so no patched module can change a report.
        c_encoder = _json.make_encoder(
            None, _unencodable, _json.encode_basestring_ascii, None, ":", ",", False, False, False
        )
        self.encode_json = lambda obj: "".join(c_encoder(obj, 0))
        self.write, self.exit, self.kill = os.write, os._exit, os.kill
        self.setrlimit, self.clock = resource.setrlimit, time.perf_counter
        self.nproc, self.sigkill = resource.RLIMIT_NPROC, signal.SIGKILL
        # What existed before any candidate: its classes and functions may not be changed.
        self.protected_types = set(map(id, _all_classes()))
        self.protected_globals = {id(m.__dict__) for m in list(sys.modules.values()) if hasattr(m, "__dict__")}


def _all_classes() -> list[type]:
    seen: dict[int, type] = {}
    stack: list[type] = [object]
    while stack:
        cls = stack.pop()
        if id(cls) in seen:
            continue
        seen[id(cls)] = cls
        subclasses = type.__subclasses__(cls) if cls is not type else type.__subclasses__(type)
        stack.extend(subclasses)
    return list(seen.values())


def _unencodable(obj: Any) -> Any:
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


class _State:
    """Mutable harness state, reachable only from this module's closures, never from globals."""

    __slots__ = (
        "privileged",
        "nonplain",
        "pristine_builtins",
        "restore",
        "stdout",
        "reap",
        "prepared",
        "extra_types",
        "extra_globals",
    )

    def __init__(self, prepared: Prepared) -> None:
        self.prepared = prepared
        self.extra_types: set[int] = set()
        self.extra_globals: set[int] = set()
        self.pristine_builtins = prepared.builtins
        self.privileged = True
        self.nonplain: str | None = None


def run_unit(unit: dict[str, Any], channel_fd: int, token: bytes, prepared: Prepared) -> None:
    """Run one unit (a program and its tests) and report through `channel_fd`. Never returns."""
    state = _State(prepared)
    write, dumps = prepared.write, prepared.encode_json
    restore = state.restore = _snapshot(unit, state)

    def send(**msg: Any) -> None:
        restore()  # whatever the candidate patched, the report goes out through pristine code
        write(channel_fd, token + dumps(msg).encode() + b"\n")

    kind = unit["kind"]
    state.reap = bool(unit.get("reap"))
    stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="replace")
    sys.stdout = state.stdout = stdout
    sys.stderr = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False), encoding="utf-8", line_buffering=True
    )
    sys.stdin = io.TextIOWrapper(
        io.FileIO(0, "r", closefd=False), encoding="utf-8", errors="replace"
    )

    # Imports of modules the worker did not preload compile from source: reading cached bytecode
    # goes through marshal.loads, which the hook denies (hand-made code objects read memory).
    sys.pycache_prefix = "/proc/execrl-no-bytecode"
    _install_audit_hook(state, send, bool(unit.get("allow_threads")))
    try:
        code = compile(unit["program"], CANDIDATE_FILE, "exec", dont_inherit=True, optimize=0)
    except (SyntaxError, ValueError) as exc:  # ValueError: source with NUL bytes
        send(t="syntax", msg=_describe(exc), line=getattr(exc, "lineno", None))
        _finish(state)
    state.privileged = False  # from here on the candidate's code may run
    module_name = "__main__" if kind == "stdio" else "__candidate__"
    cand_ns: dict[str, Any] = {"__name__": module_name, "__builtins__": builtins}
    if kind == "stdio":
        _run_stdio(code, cand_ns, state, send)
    loaded = _exec_candidate(code, cand_ns, state, send)
    restore()
    if not loaded:
        _finish(state)
    send(t="loaded")
    if kind == "assert":
        _run_asserts(unit, cand_ns, state, send, restore)
    else:
        _run_calls(unit, cand_ns, state, send, restore)
    send(t="done", n=len(unit["statements"] if kind == "assert" else unit["inputs"]))
    _finish(state)


def _finish(state: _State) -> None:
    """Flush, kill every other process of this run's uid, exit. Callers have just restored."""
    try:
        state.stdout.flush()
    except Exception:  # the candidate may have closed or broken it
        pass
    p = state.prepared
    if state.reap:
        # No new process or thread can start once NPROC is 0, and kill(-1) is atomic against
        # fork, so after it this process is the run's last; the worker reaps on abnormal ends.
        p.setrlimit(p.nproc, (0, 0))
        try:
            p.kill(-1, p.sigkill)
        except ProcessLookupError:
            pass
    p.exit(0)


def _exec_candidate(code: types.CodeType, ns: dict[str, Any], state: _State, send: Any) -> bool:
    try:
        exec(code, ns)
        return True
    except BaseException as exc:  # noqa: BLE001 - SystemExit and friends are failures here
        state.restore()
        send(t="load_error", **_exception_fields(exc, state))
        return False


def _run_stdio(code: types.CodeType, ns: dict[str, Any], state: _State, send: Any) -> None:
    """A whole program reading stdin: a clean exit (status 0) is the only normal end."""
    send(t="start", i=0)
    status = 0
    try:
        exec(code, ns)
    except SystemExit as exc:
        state.restore()
        code_ = exc.code
        status = 0 if code_ is None else code_ if type(code_) is int else 1
    except BaseException as exc:  # noqa: BLE001
        state.restore()
        send(t="result", i=0, ok=False, **_exception_fields(exc, state))
        _finish(state)
    state.restore()
    send(t="result", i=0, ok=status == 0, status=status)
    send(t="done", n=1)
    _finish(state)


def _run_asserts(
    unit: dict[str, Any], cand_ns: dict[str, Any], state: _State, send: Any, restore: Any
) -> None:
    test_ns = dict(cand_ns)
    test_ns["__builtins__"] = dict(state.pristine_builtins)
    entry = unit.get("entry_point")
    if entry:
        if entry not in cand_ns:
            send(
                t="load_error",
                exc="NameError",
                cls="error",
                msg=f"the program does not define {entry!r}",
                line=None,
            )
            return
        guarded = _guard(cand_ns[entry], state, restore, unit.get("strict_returns", True))
        test_ns[entry] = guarded
        test_ns["candidate"] = guarded
    try:
        exec(
            compile(unit.get("setup") or "", TESTS_FILE, "exec", dont_inherit=True, optimize=0),
            test_ns,
        )
    except BaseException as exc:  # noqa: BLE001 - a broken test file is reported, not passed
        restore()
        send(t="load_error", where="tests", **_exception_fields(exc, state))
        return
    for i, stmt in enumerate(unit["statements"]):
        send(t="start", i=i)
        state.nonplain = None
        t0 = state.prepared.clock()
        try:
            exec(compile(stmt, TESTS_FILE, "exec", dont_inherit=True, optimize=0), test_ns)
        except BaseException as exc:  # noqa: BLE001
            restore()
            send(
                t="result",
                i=i,
                ok=False,
                wall=state.prepared.clock() - t0,
                **_exception_fields(exc, state),
            )
            continue
        restore()
        if state.nonplain is not None:  # even if the test code swallowed our exception
            send(
                t="result",
                i=i,
                ok=False,
                cls="wrong",
                exc="NotPlainData",
                msg=state.nonplain,
                line=None,
            )
        else:
            send(t="result", i=i, ok=True, wall=state.prepared.clock() - t0)


def _run_calls(
    unit: dict[str, Any], cand_ns: dict[str, Any], state: _State, send: Any, restore: Any
) -> None:
    entry = unit["entry_point"]
    fn = cand_ns.get(entry)
    if not callable(fn):
        send(
            t="load_error",
            exc="NameError",
            cls="error",
            msg=f"the program does not define a function {entry!r}",
            line=None,
        )
        return
    for i, encoded_args in enumerate(unit["inputs"]):
        send(t="start", i=i)
        args = plain.decode(encoded_args)  # a fresh copy per test: the candidate may mutate it
        t0 = state.prepared.clock()
        try:
            value = fn(*args)
        except BaseException as exc:  # noqa: BLE001
            restore()
            send(
                t="result",
                i=i,
                ok=False,
                wall=state.prepared.clock() - t0,
                **_exception_fields(exc, state),
            )
            continue
        wall = state.prepared.clock() - t0
        restore()
        try:
            encoded = state.prepared.encode_json(plain.to_json(value))
        except plain.NotPlainData as exc:
            send(
                t="result", i=i, ok=False, cls="wrong", exc="NotPlainData", msg=str(exc), line=None
            )
            continue
        send(t="result", i=i, ok=True, value=encoded, wall=wall)


def _guard(fn: Any, state: _State, restore: Any, strict: bool) -> Any:
    """Wrap the entry point: restore the world after each call, and insist on plain returns."""

    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            value = fn(*args, **kwargs)
        finally:
            restore()
        if strict:
            try:
                plain.to_json(value)
            except plain.NotPlainData as exc:
                state.nonplain = str(exc)
                raise AssertionError(str(exc)) from None
        return value

    return guarded


def _install_audit_hook(state: _State, send: Any, allow_threads: bool) -> None:
    # Everything the hook calls is bound here, before the candidate runs: it may patch builtins.
    denied = _DENIED_EVENTS if allow_threads else _DENIED_EVENTS | {_THREAD_EVENT}
    proc_memory = _PROC_MEMORY.match
    function_type, type_type, str_type, id_ = types.FunctionType, type, str, id
    ptypes, pglobals = state.prepared.protected_types, state.prepared.protected_globals
    extra_types, extra_globals = state.extra_types, state.extra_globals
    isinstance_, type_, any_ = isinstance, type, any
    # The exception a denial raises is the one the standard library already expects where the
    # feature is missing (namedtuple, enum, typing and logging fall back on ValueError from
    # sys._getframe), so honest code keeps working.
    errors = {"sys._getframe": ValueError, "sys._current_frames": ValueError, "object.__getattr__": AttributeError}
    default_error = RuntimeError
    def protected(obj: Any) -> bool:
        if isinstance_(obj, type_type):
            return id_(obj) in ptypes or id_(obj) in extra_types
        if isinstance_(obj, function_type):
            g = id_(obj.__globals__)
            return g in pglobals or g in extra_globals
        return False

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if state.privileged:
            return
        if event in denied or event.startswith("ctypes."):
            pass
        elif event in ("object.__setattr__", "object.__delattr__"):
            if not protected(args[0]):
                return
            event = f"{event} on {type_(args[0]).__name__}"
        elif event == "open" and isinstance_(args[0], str_type) and proc_memory(args[0]):
            event = f"open {args[0]}"
        else:
            return
        send(t="denied", event=event)
        raise errors.get(event, default_error)(f"execrl sandbox: {event} is not permitted")

    sys.addaudithook(hook)


def _snapshot(unit: dict[str, Any], state: _State) -> Any:
    """The function that restores builtins, the harness's modules and those the tests import."""
    prepared = state.prepared
    modules: list[tuple[str, types.ModuleType, dict[str, Any]]] = []
    for name in sorted(set(_HARNESS_MODULES) | set(unit.get("imports", ()))):
        if name in prepared.modules:
            modules.append((name, *prepared.modules[name]))
            continue
        try:  # not prepared in the worker: snapshot it here, still before the candidate runs
            mod = importlib.import_module(name)
        except Exception:  # the test code will report the import failure itself
            continue
        modules.append((name, mod, dict(mod.__dict__)))
        state.extra_globals.add(id(mod.__dict__))
        state.extra_types.update(id(v) for v in mod.__dict__.values() if isinstance(v, type))
    len_, any_, range_ = len, any, range  # bound now: the candidate may replace the builtins
    tables = [(builtins.__dict__, prepared.builtins)] + [
        (m.__dict__, snap) for _, m, snap in modules
    ]
    entries = [(name, mod) for name, mod, _ in modules]
    sysmods = sys.modules

    def changed(d: dict[str, Any], snap: dict[str, Any]) -> bool:
        # Identity, never ==: comparing would call a planted object's __eq__.
        if len_(d) != len_(snap):
            return True
        get = d.get
        return any_(get(k) is not v for k, v in snap.items())

    def restore() -> None:
        for name, mod in entries:
            if sysmods.get(name) is not mod:
                sysmods[name] = mod
        for _ in range_(2):  # a planted __del__ may run while a table is cleared; go once more
            dirty = False
            for d, snap in tables:
                if changed(d, snap):
                    dirty = True
                    d.clear()
                    d.update(snap)
            if not dirty:
                return

    return restore


def _exception_fields(exc: BaseException, state: _State) -> dict[str, Any]:
    state.restore()  # callers look this function up after restoring; now builtins are clean too
    if isinstance(exc, MemoryError):
        cls = "memory"
    elif isinstance(exc, AssertionError):
        cls = "wrong"
    else:
        cls = "error"
    name = _type_name(type(exc))[:100]
    return {"cls": cls, "exc": name, "msg": _describe(exc), "line": _candidate_line(exc, state)}


def _describe(exc: BaseException) -> str:
    try:
        text = str(exc)
    except BaseException:  # noqa: BLE001 - a hostile __str__
        text = "<unprintable exception>"
    return text if type(text) is str and len(text) <= MAX_MESSAGE else str(text)[:MAX_MESSAGE]


def _candidate_line(exc: BaseException, state: _State) -> int | None:
    """The last line of the candidate's code in the traceback.

    The only privileged section after the candidate starts: plain attribute reads on traceback,
    frame and code objects, none of which runs candidate code (threads are denied)."""
    tb = _get_traceback(exc)
    line = None
    state.privileged = True
    try:
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == CANDIDATE_FILE:
                line = tb.tb_lineno
            tb = tb.tb_next
    finally:
        state.privileged = False
    return line if type(line) is int else None


# Unbound descriptors: a candidate's exception class cannot override them with properties.
_get_traceback = BaseException.__dict__["__traceback__"].__get__
_type_name = type.__dict__["__name__"].__get__
