"""Tracebacks without frames, for the standard library's `traceback` in a sandboxed run.

The audit hook refuses a traceback's `tb_frame` (from any frame, `f_back` leads to the harness's
and the tests' frames), and `traceback` reads it to format every exception: as shipped,
`traceback.print_exc()`, `format_exc()`, `logging.exception()` and a thread's uncaught error
would fail where plain Python prints. `install` gives the module walks that read only what a
traceback entry holds itself, its line number and the next entry, so each entry prints as

    File "<frame hidden by the sandbox>", line 7, in <frame hidden by the sandbox>

followed by the exception as usual. No frame, file name or local variable is read; a program
that asks for them (`capture_locals`, `walk_tb`'s frames) gets the placeholder's, which are
empty. Installed in the worker once, before any run (`worker._setup`), and by the chart
verifier's runner (its source shipped with the run), so it has no import of execrl's.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the worker 2 MB
if TYPE_CHECKING:
    from collections.abc import Iterator
    from types import ModuleType, TracebackType
    from typing import Any

HIDDEN = "<frame hidden by the sandbox>"


class _HiddenCode:
    """What `traceback` reads of a frame's code."""

    co_filename = HIDDEN
    co_name = HIDDEN
    co_qualname = HIDDEN


class _HiddenFrame:
    """What `traceback` reads of a frame: its code, its globals (for `linecache`), its locals
    (`capture_locals`). Fresh mappings each time, so no program can leave anything in them."""

    f_code = _HiddenCode()

    @property
    def f_globals(self) -> dict[str, Any]:
        return {}

    @property
    def f_locals(self) -> dict[str, Any]:
        return {}


_FRAME = _HiddenFrame()


def walk_tb(tb: TracebackType | None) -> Iterator[tuple[Any, int]]:
    """`traceback.walk_tb`: (frame, line) for each entry, the frame a placeholder."""
    while tb is not None:
        yield _FRAME, tb.tb_lineno
        tb = tb.tb_next


def walk_tb_with_full_positions(tb: TracebackType | None) -> Iterator[tuple[Any, tuple]]:
    """`traceback._walk_tb_with_full_positions` (Python 3.11+): the columns, which only the
    frame's code knows, left out (no carets under the failing expression)."""
    while tb is not None:
        yield _FRAME, (tb.tb_lineno, tb.tb_lineno, None, None)
        tb = tb.tb_next


def clear_frames(tb: TracebackType | None) -> None:
    """`traceback.clear_frames` (unittest calls it): there is no frame of the program's to
    clear that it could reach."""


def install(traceback: ModuleType) -> None:
    """Point `traceback`'s walks over tracebacks at the frame-free ones above."""
    replacements = {
        "walk_tb": walk_tb,
        "_walk_tb_with_full_positions": walk_tb_with_full_positions,
        "clear_frames": clear_frames,
    }
    for name, function in replacements.items():
        if hasattr(traceback, name):  # private names move between Python versions
            setattr(traceback, name, function)
