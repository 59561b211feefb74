"""A program's own timers, with handlers that are handed no frame.

No run may set a signal's action (`confine/handler_filter.py`: CPython hands a handler the frame
it interrupts, and from there `f_back` leads to the tests' frames). Honest programs do use a
handler to bound their own time (`signal.signal(SIGALRM, stop)` with `alarm` or `setitimer`),
so the worker sets, once and before any run, `dispatch` as the handler of the timer signals
(`TIMER_SIGNALS`), and `install` points `signal.signal` and `signal.getsignal` for those
signals at `HANDLERS`, a plain table, instead of the kernel. `dispatch` drops the frame and
calls the program's handler with None in its place, as CPython does where it has no frame.

Why the program still gets no frame: `dispatch` hands its frame to nothing, and its code and
the default that holds its table cannot be replaced (the audit hook refuses changing the
defaults or code of a function that existed before the candidate ran); whatever the program
puts in the table (directly, or through `_signal.getsignal`, which returns `dispatch`) is
called with None. The program's handler cannot reach its own frame either: every door to one
is the audit hook's to refuse. Between the tests' lines the table is emptied (`guard.quiet`),
as every handler of the candidate was undone before.

What differs from plain Python: a timer signal with no handler of the program's, or with
SIG_DFL or SIG_IGN, is ignored instead of ending the process (the kernel's default action
cannot be given back once runs refuse new actions; a run stopped that way failed anyway), the
handler gets None for its frame, and a timer signal that arrives while the harness reads a
traceback (`harness._candidate_line`) is dropped. A handler for any other signal is refused,
with a message that says so.
"""

from __future__ import annotations

import _signal
import errno
import signal as _signal_module
import sys

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the worker 2 MB
if TYPE_CHECKING:
    from types import ModuleType
    from typing import Any

TIMER_SIGNALS = frozenset(
    {int(_signal_module.SIGALRM), int(_signal_module.SIGVTALRM), int(_signal_module.SIGPROF)}
)
HANDLERS: dict[int, Any] = {}  # the program's handler (or 0, 1 for SIG_DFL, SIG_IGN) by signal
_DEFAULT, _IGNORE = int(_signal_module.SIG_DFL), int(_signal_module.SIG_IGN)
# The signal module's own functions, for the signals the table does not hold.
_REAL: dict[str, Any] = {}


def dispatch(
    signum: int,
    frame: Any,
    _handlers: dict[int, Any] = HANDLERS,
    _audit: Any = sys.audit,
    _refused: type[BaseException] = RuntimeError,
) -> None:
    """The handler of every timer signal: the program's, called without the frame.

    Its table is a positional default: `__defaults__` is a tuple, where `__kwdefaults__` would
    hand out the dict that holds it, and a table swapped in there would escape `guard.quiet`.
    The audit event asks the harness's hook whether the harness is in a privileged section (it
    reads a traceback's frames with the hook open to its own thread, which is the thread
    Python runs handlers in): there the hook refuses it, and the handler does not run."""
    del frame  # the interrupted frame: handed to nothing, kept nowhere
    handler = _handlers.get(signum)
    if handler is None or type(handler) is int:  # 0 and 1: SIG_DFL, SIG_IGN
        return
    try:
        _audit("execrl.signal_handler", signum)  # a literal: the name cannot be rebound
    except _refused:
        return
    handler(signum, None)


def set_handler(signalnum: Any, handler: Any) -> Any:
    """`signal.signal`: a timer signal's handler goes to the table; any other is refused."""
    number = int(signalnum)
    if number not in TIMER_SIGNALS:
        try:
            return _REAL["signal"](signalnum, handler)
        except PermissionError:
            raise PermissionError(
                errno.EPERM,
                f"execrl sandbox: a program may not change how {_name(number)} is handled, only "
                "SIGALRM, SIGVTALRM and SIGPROF (CPython hands a handler the frame it interrupts)",
            ) from None
    if handler is _signal_module.SIG_DFL or handler is _signal_module.SIG_IGN:
        stored = int(handler)
    elif type(handler) is int and handler in (_DEFAULT, _IGNORE):
        stored = handler
    elif callable(handler):
        stored = handler
    else:
        raise TypeError(
            "signal handler must be signal.SIG_IGN, signal.SIG_DFL, or a callable object"
        )
    previous = HANDLERS.get(number, _DEFAULT)
    HANDLERS[number] = stored
    return _as_handler(previous)


def get_handler(signalnum: Any) -> Any:
    """`signal.getsignal`: a timer signal's handler is the table's."""
    number = int(signalnum)
    if number not in TIMER_SIGNALS:
        return _REAL["getsignal"](signalnum)
    return _as_handler(HANDLERS.get(number, _DEFAULT))


def _name(number: int) -> str:
    try:
        return _signal_module.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _as_handler(value: Any) -> Any:
    if type(value) is int:
        return _signal_module.Handlers(value)  # SIG_DFL or SIG_IGN, as signal.getsignal says
    return value


def install(signal_module: ModuleType) -> None:
    """In the worker, before any run: `dispatch` handles the timer signals (a system call the
    runs may no longer make), and `signal_module`'s `signal` and `getsignal` use the table."""
    for sig in TIMER_SIGNALS:
        _signal.signal(sig, dispatch)
    _REAL.update(signal=signal_module.signal, getsignal=signal_module.getsignal)
    set_handler.__doc__ = signal_module.signal.__doc__
    get_handler.__doc__ = signal_module.getsignal.__doc__
    signal_module.signal, signal_module.getsignal = set_handler, get_handler
