"""The seccomp program that refuses a run every new signal action (`confine/handler_filter.py`),
applied in a forked child of the test process: a new action is refused by every route (Python's
`signal`, the C `_signal`, glibc, the raw system call, an `act` pointer whose low half is 0), a
query is allowed, and nothing is left set behind a refusal."""

from __future__ import annotations

import _signal
import ctypes
import errno
import os
import signal

import pytest

from execrl.sandbox.confine import handler_filter, syscalls

SYS_RT_SIGACTION = {"x86_64": 13, "aarch64": 134}.get(os.uname().machine)
KERNEL_SIGSET_BYTES = 8  # rt_sigaction's last argument: the kernel's sigset_t, 64 signals


def _in_filtered_child(check) -> int:  # noqa: ANN001
    """Run `check()` in a fork that refused itself new signal actions; its exit status."""
    pid = os.fork()
    if pid == 0:
        status = 99
        try:
            syscalls.prctl(syscalls.PR_SET_NO_NEW_PRIVS, 1)
            handler_filter.refuse_new_handlers(handler_filter.handler_filter())
            status = check()
        finally:
            os._exit(status)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _raw_rt_sigaction(sig: int, act: int | None, old: int | None) -> int:
    """The system call itself, not glibc's wrapper: the errno, or 0."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    ret = libc.syscall(
        ctypes.c_long(SYS_RT_SIGACTION),
        ctypes.c_long(sig),
        ctypes.c_void_p(act),
        ctypes.c_void_p(old),
        ctypes.c_long(KERNEL_SIGSET_BYTES),
    )
    return ctypes.get_errno() if ret != 0 else 0


pytestmark = pytest.mark.skipif(
    handler_filter.handler_filter() is None, reason="no filter for this machine's system calls"
)


def test_every_route_to_a_new_signal_action_is_refused():
    def check() -> int:
        for action in (lambda *_: None, _signal.SIG_IGN, _signal.SIG_DFL):
            try:
                _signal.signal(signal.SIGUSR1, action)
                return 1
            except PermissionError:
                pass
        if _signal.getsignal(signal.SIGUSR1) is not _signal.SIG_DFL:  # nothing set behind it
            return 2
        buffer = ctypes.create_string_buffer(256)  # room for any struct sigaction
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.sigaction(signal.SIGUSR1, buffer, None) == 0:  # glibc's wrapper
            return 3
        if _raw_rt_sigaction(signal.SIGUSR1, ctypes.addressof(buffer), None) != errno.EPERM:
            return 4
        # Low half 0, high half not: were only the low half checked, the kernel would be asked,
        # and would answer EFAULT for the unmapped address.
        if _raw_rt_sigaction(signal.SIGUSR1, 1 << 32, None) != errno.EPERM:
            return 5
        return 0

    assert _in_filtered_child(check) == 0


def test_a_query_is_allowed_and_sigint_is_ignored():
    def check() -> int:
        buffer = ctypes.create_string_buffer(256)
        if _raw_rt_sigaction(signal.SIGUSR1, None, ctypes.addressof(buffer)) != 0:
            return 1
        if _signal.getsignal(signal.SIGINT) is not _signal.SIG_IGN:
            return 2
        return 0

    assert _in_filtered_child(check) == 0
