"""The audit hook the harness installs just before the candidate runs (`install`): it denies
the ways Python code could reach the harness's key or bend the tests. Frames (`sys._getframe`,
and the attributes that hand one out, `FRAME_ATTRIBUTES`), the garbage collector's object
lists, trace and profile hooks, ctypes, hand-made code objects and marshal, subinterpreters,
CPython's test and experimental modules, reading the process's own memory through /proc, new
processes (unless the job allows them), and changing the code or defaults of functions that
existed before the candidate ran or that the tests define, and reading the defaults of the
tests' functions and of what stands for the candidate in them (`guard`'s wrapper). Every other
audited read is allowed (`@dataclass`, `inspect.signature`, `logging`), and `traceback` formats
exceptions without frames (`frameless`).

Like `harness`, it runs on a private copy of its globals and builtins (`prepared._privatize`),
so patching this module or a builtin changes nothing the hook does. The chart verifier's runner
installs this same hook (its source shipped with the run), so the list has one home.

One door to a frame raises no audit event: CPython hands a Python signal handler the frame it
interrupts, and `_imp.create_builtin` makes a fresh `_signal` module whenever asked, so no hook
or wrapper can close it. The kernel does: no run may set a signal's action
(`confine/handler_filter.py`), and a program's own timer handlers are called by the worker's,
with None for the frame (`timer_signals`). `types.coroutine` rewrites a function's code
(`code.__new__`, refused here), so the worker replaces it (`coroutine_decorator`): `asyncio`
applies it at import.
"""

from __future__ import annotations

import re
import sys
import types

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the worker 2 MB
if TYPE_CHECKING:
    from typing import Any

MAX_DENIALS_REPORTED = 50  # denied audit events reported per run

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
        "code.__new__",  # hand-made bytecode can read arbitrary memory
        "marshal.load",
        "marshal.loads",
        # A subinterpreter has no audit hook of ours: ctypes, frames and gc.get_objects work
        # there, in the same address space.
        "cpython.PyInterpreterState_New",
    }
)
# CPython's test and experimental modules offer what the audit hook exists to deny (raw memory,
# frame evaluation hooks, subinterpreters); no honest program imports them.
_DENIED_IMPORT = re.compile(r"^(_test|_xx|_interp|_ctypes_test)")
# New processes, unless the job allows them (`Job.allow_threads`): a forked copy of the harness
# would go on with the tests, with the key, beside the original. Threads are always allowed:
# in assert-style tests none may outlive the call that started it (`leftovers.sole_thread`).
_PROCESS_EVENTS = frozenset(
    {"os.fork", "os.forkpty", "os.posix_spawn", "os.system", "subprocess.Popen"}
)
# The audited attribute reads that hand out a frame. From any frame, `f_back` leads to the
# harness's frames (its state, its key) and the tests' (their expected values), and `f_back`,
# `f_locals` and `f_globals` raise no audit event (CPython 3.11 to 3.13): these are the doors,
# so they stay shut (`f_back` for an interpreter that audits it). The other audited reads hand
# out code objects or defaults, never a frame: a function's `__code__` (`logging` at import),
# `__defaults__` and `__kwdefaults__` (`inspect.signature`, so `@dataclass`), a frame's or a
# generator's code (`traceback`, `inspect`).
FRAME_ATTRIBUTES = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back"})
# Defaults are refused only on the functions of the tests and of `guard`'s wrapper, which keeps
# what it works with (the run's state) in its keyword defaults.
DEFAULTS = frozenset({"__defaults__", "__kwdefaults__"})
_PROC_MEMORY = re.compile(r"^/proc/(self|thread-self|\d+)(/task/\d+)?/(mem|pagemap|map_files)")


def install(state: dict[str, Any], send: Any, allow_threads: bool) -> None:
    """Deny, from now on in this process, what the module docstring lists; each denial is
    reported through `send` (the first MAX_DENIALS_REPORTED) and raises."""
    # Everything the hook calls is bound here, before the candidate runs.
    denied = _DENIED_EVENTS if allow_threads else _DENIED_EVENTS | _PROCESS_EVENTS
    proc_memory, denied_import = _PROC_MEMORY.match, _DENIED_IMPORT.match
    function_type, str_type, id_ = types.FunctionType, str, id
    isinstance_, type_ = isinstance, type
    frame_attributes, defaults = FRAME_ATTRIBUTES, DEFAULTS
    get_ident = state["p"]["get_ident"]
    pglobals, extra_globals = state["p"]["protected_globals"], state["extra_globals"]
    # A denial raises what the standard library already expects where the feature is missing
    # (namedtuple, enum, typing and logging fall back on ValueError from sys._getframe).
    errors = {"sys._getframe": ValueError, "sys._current_frames": ValueError}
    default_error = RuntimeError

    def protected(obj: Any, made_by_us: bool = False) -> bool:
        # Functions raise audit events when their code or defaults change; classes do not, so
        # the classes of the modules the tests use are restored (and checked) by `_snapshot`.
        # `made_by_us`: only the tests' and `guard`'s wrappers (`extra_globals`), not every
        # module's that existed before the candidate (`inspect.signature(namedtuple)`).
        if isinstance_(obj, function_type):
            g = id_(obj.__globals__)
            return g in extra_globals or (not made_by_us and g in pglobals)
        return False

    denials = [0]

    def report(event: str) -> None:
        # The first ones say what was tried; a loop of denied calls must not fill the channel.
        denials[0] += 1
        if denials[0] <= MAX_DENIALS_REPORTED:
            state["dirty"] = True  # in the middle of the candidate's code
            send(t="denied", event=event)

    def hook(event: str, args: tuple[Any, ...]) -> None:
        privileged = state["privileged"]
        # Only the harness's own thread is privileged: with threads allowed, another could
        # reach the harness's frames during `_candidate_line`.
        if privileged is True or (privileged and get_ident() == privileged):
            if event == "execrl.signal_handler":
                # A timer handler of the program's, about to run in the harness's thread
                # (`timer_signals.dispatch`): never with the harness's privilege.
                raise RuntimeError("execrl sandbox: the harness is in a privileged section")
            return
        if event in denied or event.startswith("ctypes."):
            pass
        elif event == "object.__getattr__":
            # `args[1]` is the C string CPython names the attribute by, an exact str.
            if args[1] in frame_attributes:
                event = f"reading {args[1]}"
            elif args[1] in defaults and protected(args[0], True):
                event = f"reading {args[1]} of {type_(args[0]).__name__}"
            else:
                return
        elif event in ("object.__setattr__", "object.__delattr__"):
            if not protected(args[0]):
                return
            event = f"{event} on {type_(args[0]).__name__}"
        elif event == "open" and isinstance_(args[0], str_type) and proc_memory(args[0]):
            event = f"open {args[0]}"
        elif event == "import" and isinstance_(args[0], str_type) and denied_import(args[0]):
            event = f"import {args[0]}"
            report(event)
            raise ImportError(f"execrl sandbox: {event} is not permitted")
        else:
            return
        report(event)
        error = AttributeError if event[:8] == "reading " else errors.get(event, default_error)
        raise error(f"execrl sandbox: {event} is not permitted")

    sys.addaudithook(hook)
