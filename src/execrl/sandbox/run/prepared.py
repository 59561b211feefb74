"""What the worker builds once, before any fork, for the harness (`harness.run_unit`) in every
child: snapshots of the modules and builtins the tests use, the harness's private copies of its
own functions (`_privatize`), the streams, and every function the harness calls after the
candidate has run, bound here where the candidate cannot patch it. The threat model is at the
top of `harness.py`."""

from __future__ import annotations

import _signal
import builtins
import io
import os
import resource
import signal
import sys
import time
import types

from execrl.sandbox.confine.handler_filter import IGNORED
from execrl.sandbox.run import audit_hook, guard, harness, leftovers, plain, restorer, timer_signals
from execrl.sandbox.run.harness import CODE_CACHE_SIZE, TESTS_FILE
from execrl.tasks import values

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the worker 2 MB
if TYPE_CHECKING:
    from typing import Any


class Prepared:
    """Built once in the worker, before any fork: children inherit it without touching it.

    Work done here is shared copy-on-write by every child; done in a child, it would touch
    objects and fault in private copies of their pages at every run. What the child uses after
    the candidate has run lives in `parts`, a plain dict: attribute lookups on an instance of a
    Python class go through that class, which the candidate could patch (assignments to class
    attributes raise no audit event)."""

    def __init__(self, protect: list[str]) -> None:
        import _json
        import _signal
        import _thread
        import gc
        from _blake2 import blake2b

        # As a run has them: the worker's, but for the signals each run ignores before its
        # first line (`handler_filter.refuse_new_handlers`).
        handlers = tuple(
            (sig, _signal.SIG_IGN if sig in IGNORED else _signal.getsignal(sig))
            for sig in sorted(_catchable())
        )
        modules: dict[str, tuple[Any, ...]] = {}
        for name in restorer.module_closure(protect):
            mod = sys.modules[name]
            modules[name] = (mod, *restorer.module_snapshot(mod))
        # The C encoder reads no module globals, so no patched module can change a report.
        c_encoder = _json.make_encoder(
            None, _unencodable, _json.encode_basestring_ascii, None, ":", ",", False, False, False
        )
        self.parts: dict[str, Any] = {
            "builtins": dict(builtins.__dict__),
            # The tests' private builtins (`harness._run_asserts`), made once: every run is a fork.
            "test_builtins": dict(builtins.__dict__),
            # The builtins' snapshot for the restore (`restorer.make_restore`), taken once here.
            "builtins_snapshot": restorer.module_snapshot(builtins),
            "modules": modules,
            "classes": {
                name: restorer.class_snapshots(entry[0], name) for name, entry in modules.items()
            },
            "encode_json": lambda obj: "".join(c_encoder(obj, 0)),
            "write": os.write,
            # A C type: nothing the candidate patches changes how a message is sealed.
            "blake2b": blake2b,
            "lock": _thread.RLock,
            "fstat": os.fstat,
            "get_ident": _thread.get_ident,
            # The method, not the attribute: a stream's own dict may shadow it (`_finish`).
            "flush": io.TextIOWrapper.flush,
            "exit": os._exit,
            "kill": os.kill,
            "setrlimit": resource.setrlimit,
            "clock": time.perf_counter,
            "nproc": resource.RLIMIT_NPROC,
            "sigkill": signal.SIGKILL,
            # What existed before any candidate: its functions may not be changed.
            "protected_globals": {
                id(m.__dict__) for m in list(sys.modules.values()) if hasattr(m, "__dict__")
            },
            "streams": _streams(),
            "code_cache": {},
            # For `guard`, bound here because the candidate may patch the modules they are in.
            "candidate_code": guard.CANDIDATE_CODE,
            "function_type": types.FunctionType,
            "gc_enable": gc.enable,
            "gc_isenabled": gc.isenabled,
            "getrecursionlimit": sys.getrecursionlimit,
            "setrecursionlimit": sys.setrecursionlimit,
            "recursion_limit": sys.getrecursionlimit(),
            "gc_disable": gc.disable,
            "method_type": types.MethodType,
            # The count of threads running Python code, and a pause that lets others run, for
            # `leftovers.sole_thread`.
            "python_threads": _thread._count,
            "sleep": time.sleep,
            "open": os.open,
            "setitimer": signal.setitimer,
            "timers": (signal.ITIMER_REAL, signal.ITIMER_VIRTUAL, signal.ITIMER_PROF),
            "getsignal": _signal.getsignal,
            "set_handler": _signal.signal,
            "handlers": handlers,
            "timer_handlers": timer_signals.HANDLERS,  # the program's own (`timer_signals`)
        }
        private = _privatize()
        self.run_unit = private[harness.__name__]["run_unit"]
        self.prepare_unit = private[harness.__name__]["prepare_unit"]  # for `cases`
        self.parts["protected_globals"].update(id(g) for g in private.values())

    def precompile(self, unit: dict[str, Any]) -> None:
        """Compile the (trusted) test code here, once per worker, instead of in every child."""
        if unit["kind"] != "assert":
            return
        cache = self.parts["code_cache"]
        for source in [unit.get("setup") or "", *unit["statements"]]:
            key = (source, TESTS_FILE)
            if key not in cache:
                if len(cache) >= CODE_CACHE_SIZE:
                    cache.pop(next(iter(cache)))
                cache[key] = compile(source, TESTS_FILE, "exec", dont_inherit=True, optimize=0)


def _streams() -> tuple[io.TextIOWrapper, io.TextIOWrapper, io.TextIOWrapper]:
    """Text streams over fds 0-2, which each child points at its own pipes before use."""
    return (
        io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8", errors="replace"),
        io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="replace"),
        io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", line_buffering=True),
    )


def _catchable() -> set[int]:
    """The signals a handler can be set for (not SIGKILL, SIGSTOP, or those Python refuses)."""
    out = set()
    for sig in signal.valid_signals():
        try:  # `_signal`'s: `signal.signal` of a timer signal sets no action (`timer_signals`)
            _signal.signal(sig, _signal.getsignal(sig))
        except (OSError, ValueError, TypeError):
            continue
        out.add(int(sig))
    return out


def _privatize() -> dict[str, dict[str, Any]]:
    """Copies of the functions of `values` (`execrl.tasks.values`, the tagged JSON), `plain`,
    `restorer`, `guard`, `leftovers`, `audit_hook` and `harness`, on private globals and a private copy of the builtins; each module sees the
    others' private copies (`harness` itself is imported by none of them).

    Returns the private globals by module name. Nothing at module level may refer to them, and
    no module-level value they share with the public modules may be mutable: the candidate
    reaches the public modules through `sys.modules` (tests/sandbox/test_harness_private.py)."""
    private_builtins = dict(builtins.__dict__)
    modules = (values, plain, restorer, guard, leftovers, audit_hook, harness)
    spaces: dict[str, dict[str, Any]] = {}
    for mod in modules:
        g = dict(mod.__dict__)
        g["__builtins__"] = private_builtins
        for name, value in list(g.items()):
            if isinstance(value, types.FunctionType) and value.__globals__ is mod.__dict__:
                fn = types.FunctionType(
                    value.__code__, g, value.__name__, value.__defaults__, value.__closure__
                )
                fn.__kwdefaults__ = dict(value.__kwdefaults__) if value.__kwdefaults__ else None
                g[name] = fn
        spaces[mod.__name__] = g
    views = {mod.__name__: types.SimpleNamespace(**spaces[mod.__name__]) for mod in modules[:-1]}
    for g in spaces.values():
        for name, value in list(g.items()):
            if isinstance(value, types.ModuleType) and value.__name__ in views:
                g[name] = views[value.__name__]
    return spaces


def _unencodable(obj: Any) -> Any:
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")
