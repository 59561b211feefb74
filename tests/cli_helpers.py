"""`execrl ARGS` run inside the test's process, read as a finished subprocess.

A subprocess costs an interpreter and a torch import (2 s or more on a loaded 2-core machine)
for each call; a test that is about a command's output, files and exit status, not about the
process boundary, gets the same result from `execrl.cli.main` here. Tests of the boundary itself
(signals, the console script) start the real command (tests/rl/test_interrupt_cli.py)."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Iterator
from pathlib import Path


def run_execrl(*args: str, cwd: Path | str | None = None) -> subprocess.CompletedProcess[str]:
    """`execrl ARGS` (in `cwd`, if given) as `subprocess.run(..., capture_output=True, text=True)`
    would report it: the exit status as the interpreter sets it (SystemExit's code; 1 and the
    traceback on stderr for an uncaught exception), and all that reached stdout and stderr, at
    the file descriptors too, so the output of child processes (sandbox workers) is caught."""
    from execrl.cli import main

    with _descriptors_captured() as got, _working_directory(cwd):
        try:
            code = main(list(args))
        except SystemExit as e:
            code = _exit_status(e.code)
        except Exception:  # noqa: BLE001 - the interpreter's own report of an uncaught error
            traceback.print_exc()
            code = 1
    return subprocess.CompletedProcess(["execrl", *args], code, got["stdout"], got["stderr"])


def _exit_status(code: object) -> int:
    if code is None or isinstance(code, int):
        return code or 0
    print(code, file=sys.stderr)  # as the interpreter prints `sys.exit("message")`
    return 1


@contextlib.contextmanager
def _working_directory(cwd: Path | str | None) -> Iterator[None]:
    before = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(before)


@contextlib.contextmanager
def _descriptors_captured() -> Iterator[dict[str, str]]:
    """Descriptors 1 and 2, and sys.stdout and sys.stderr over them, into temporary files while
    inside; their text in the dict yielded once outside."""
    got: dict[str, str] = {}
    streams = {"stdout": 1, "stderr": 2}
    before = {name: getattr(sys, name) for name in streams}
    for stream in before.values():
        stream.flush()
    saved = {name: os.dup(fd) for name, fd in streams.items()}
    files = {name: tempfile.TemporaryFile() for name in streams}
    try:
        for name, fd in streams.items():
            os.dup2(files[name].fileno(), fd)
            wrapper = io.TextIOWrapper(open(fd, "wb", closefd=False), write_through=True)  # noqa: SIM115
            setattr(sys, name, wrapper)
        yield got
    finally:
        for name, fd in streams.items():
            getattr(sys, name).flush()
            setattr(sys, name, before[name])
            os.dup2(saved[name], fd)
            os.close(saved[name])
            files[name].seek(0)
            got[name] = files[name].read().decode(errors="replace")
            files[name].close()
