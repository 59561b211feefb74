"""No Python run sets a signal disposition of its own: the kernel refuses it.

CPython calls a Python signal handler with the frame it interrupts, and raises no audit event
for it; from that frame `f_back` leads to the tests' frames (an assert's expected values) and
the harness's (its key). The audit hook cannot see it, and no wrapper of `signal.signal` can
close it: `_signal.signal` is the C function, and `_imp.create_builtin` makes a fresh `_signal`
module whenever asked. So each run of the harness refuses itself, by seccomp, every system call
that sets a signal's action (`rt_sigaction` with a new action, and the compat tables'
`sigaction` and `signal`; x32 numbers not at all), after the worker's own set-up and before the
program's first line (`refuse_new_handlers`, from `worker._child`). A query (`act` NULL, what
`PyOS_getsig` does) is allowed. Python's `signal.signal` sets its table only after the kernel
accepted the action, so a refused call leaves no handler behind.

Why nothing in the process can get round it:
- Every way into the kernel is filtered: `_signal.signal`, a fresh `_signal`, `faulthandler`,
  `siginterrupt` and glibc all end in the same system calls; ctypes, hand-made code and
  /proc/self/mem, the ways to run machine code of one's own, are the audit hook's to refuse.
- A seccomp filter cannot be removed, and every thread and process started after it keeps it
  (`os.fork`, threads, `posix_spawn`, and `execve` under no-new-privileges).
- Python calls a handler only where its table names one, and that table changes without a
  system call in one place: a fresh `_signal` module, on being executed, takes SIGINT's handler
  from its own dict (`default_int_handler`, which a program may replace first) where the kernel
  says SIGINT has its default action. So SIGINT is ignored in every run (`IGNORED`): the fresh
  module then takes "ignore" from the kernel, and `_thread.interrupt_main` (the one way to trip
  a handler without a signal) finds nothing to call.
- `signal.set_wakeup_fd` writes a signal's number to a descriptor: no frame.

What it costs: a program cannot change how a signal is handled (not even to SIG_DFL or
SIG_IGN), and a program it executes (with `allow_threads`) cannot either. A program's own
timers still work: the worker has set, before any run, a handler of its own on the timer
signals that hands the program's handler no frame (`run/timer_signals.py`). The filter is
known for x86_64 and aarch64; on another machine (`handler_filter()` is None) the hole stays
open. The sandbox's own limits use no handler in the run: the wall clock and the output cap are
enforced from outside, the CPU limit by the kernel (SIGXCPU keeps its default action, and now
no run can catch it).
"""

from __future__ import annotations

import _signal
import os
import signal

from execrl.sandbox.confine import syscalls

IGNORED = (signal.SIGINT,)  # the signals every run ignores (the module's docstring says why)
_NR, _ARCH, _ACT_LOW, _ACT_HIGH = 0, 4, 24, 28  # offsets in seccomp_data: args[1] is `act`
# (audit arch, the calls that set an action, whether x32 numbers exist) per system call table
# of each host architecture (arch/*/entry/syscalls, include/uapi/linux/audit.h). i386's
# `signal` takes the handler itself as its second argument: SIG_DFL (0) passes, as NULL does.
_ACTION_SYSCALLS = {
    "x86_64": ((0xC000003E, (13,), True), (0x40000003, (48, 67, 174), False)),
    "aarch64": ((0xC00000B7, (134,), False), (0x40000028, (67, 174), False)),
}


def handler_filter() -> syscalls._SockFprog | None:
    """The seccomp program refusing (EPERM) a new signal action, built once in the worker; None
    where this machine's system call numbers are not known here."""
    tables = _ACTION_SYSCALLS.get(os.uname().machine)
    if tables is None:
        return None
    ld, jeq, ret = syscalls.BPF_LD_ABS, syscalls.BPF_JEQ, syscalls.BPF_RET
    code: list[tuple[int, int, int, int]] = []
    for arch, numbers, x32 in tables:
        block = _table_block(numbers, x32)
        code += [(ld, 0, 0, _ARCH), (jeq, 0, len(block), arch)]
        code += block
    code.append((ret, 0, 0, syscalls.SECCOMP_RET_ALLOW))
    return syscalls.seccomp_program(code)


def _table_block(numbers: tuple[int, ...], x32: bool) -> list[tuple[int, int, int, int]]:
    """One table's instructions: an x32 number is refused, one of `numbers` is refused unless
    its second argument is 0 (both halves), anything else is allowed. BPF jumps are relative:
    a target at index t, from index i, is t - i - 1."""
    ld, jeq, jge, ret = syscalls.BPF_LD_ABS, syscalls.BPF_JEQ, syscalls.BPF_JGE, syscalls.BPF_RET
    allow, deny_verdict = syscalls.SECCOMP_RET_ALLOW, syscalls.SECCOMP_RET_EPERM
    checks = [(jge, syscalls.X32_BIT, True)] if x32 else []
    checks += [(jeq, n, False) for n in numbers]
    act = 1 + len(checks) + 1  # after the load of nr, the checks, and "allow"
    deny = act + 5
    block = [(ld, 0, 0, _NR)]
    for i, (op, k, refused) in enumerate(checks, 1):
        block.append((op, (deny if refused else act) - i - 1, 0, k))
    block.append((ret, 0, 0, allow))
    block += [
        (ld, 0, 0, _ACT_LOW),
        (jeq, 0, deny - (act + 1) - 1, 0),
        (ld, 0, 0, _ACT_HIGH),
        (jeq, 0, deny - (act + 3) - 1, 0),
        (ret, 0, 0, allow),
        (ret, 0, 0, deny_verdict),
    ]
    return block


def refuse_new_handlers(prog: syscalls._SockFprog | None) -> None:
    """In a run's own process, after its set-up and before the program's first line: ignore
    `IGNORED`, then refuse every new signal action for good (this process and all it starts)."""
    for sig in IGNORED:
        _signal.signal(sig, _signal.SIG_IGN)
    if prog is not None:
        syscalls.install_filter(prog)
