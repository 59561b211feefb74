"""A stdin/stdout sample's case server: the program prepared once, a fresh fork for each case.

Every case of a stdin/stdout sample is a run of its own: a fresh process, a fresh scratch
directory, its own pipes, limits and key, nothing left of the case before it. What the cases of
one sample share is everything the harness does before the program's first line runs
(`harness.prepare_unit`: its state, the audit hook, the program compiled). The worker forks a
case server per request, which does that once; then for each case the worker makes the scratch,
pipes and key as for any run (`worker._spawn`), hands the run's ends to the server (SCM_RIGHTS),
and the server forks the run, which confines itself exactly as a run forked by the worker does
(`worker._child`: session, descriptors, rlimits, uid) and calls the prepared `start`. The
worker watches the run (`pidfd_open` works on any process), kills it at its limits, and asks the
server to reap it for its exit status and resource use.

Isolation between cases (a program must not pass case k+1 by remembering case k): the program's
code never runs in the server, only in its forks, so each case starts from the same untouched
state, and each has a scratch the worker made empty. The server keeps the worker's uid (root in
the worker's namespaces); the runs drop to the run uid, so a run cannot signal, trace or kill
the server, and its `kill(-1)` at the end (`harness._finish`) reaches only its own processes.
That is why the server is used only with the uid layer on (`usable`). Compiling the program is
the one thing of the candidate's the server does (compile runs no code); it does it under the
run's address-space and CPU limits. A server that fails in any way is dropped and the case, and
every case after it, runs as before, forked by the worker (`Lost`): same verdicts, slower.

Measured on the 200-case problem of `benchmarks/stdio_throughput.py` (docs/results/stdio.md).
Imported by the worker: standard library only, no typing.
"""

from __future__ import annotations

import _socket
import os
import resource
import sys

from execrl.sandbox.confine import syscalls
from execrl.sandbox.run import protocol

TYPE_CHECKING = False  # typing stays out of the worker
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

ANSWER_S = 30.0  # the longest the trusted server may take to fork or reap (it never waits on a run)
# A run forked by the worker compiles the program inside each case's own time limit; one forked
# by the server does not. A program whose compile takes more than this share of a case's limit
# runs the old way, so that no case near its limit changes verdict for it.
COMPILE_SHARE = 0.05
_FDS = 4  # a run's stdin, channel, stdout and stderr


class Lost(Exception):
    """The case server died or did not answer: the worker runs the case itself."""


def usable(units: list[dict[str, Any]], ctx: dict[str, Any]) -> bool:
    """Several cases of one Python program, with the uid layer (see the module's docstring)."""
    if not ctx["case_server"] or ctx["uid"] is None or len(units) < 2:
        return False
    first = units[0]
    return all(
        u["kind"] == "stdio"
        and u.get("run") is None
        and u["program"] == first["program"]
        and u.get("allow_threads") == first.get("allow_threads")
        for u in units
    )


class CaseServer:
    """The worker's handle on one request's case server."""

    def __init__(self, pid: int, sock: Any) -> None:
        self.pid, self.sock = pid, sock
        self.held_bytes = 0  # the server's private memory, charged to the worker's cgroup

    @classmethod
    def start(
        cls, unit: dict[str, Any], limits: dict[str, Any], ctx: dict[str, Any], child: Callable
    ) -> CaseServer | None:
        """Fork the server and wait until it has prepared `unit`; None if it could not."""
        try:
            ours, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
        except OSError:
            return None
        try:
            pid = os.fork()
        except OSError:
            ours.close(), theirs.close()
            return None
        if pid == 0:
            ours.close()
            _serve(theirs, dict(unit, reap=True), limits, ctx, child)
        theirs.close()
        server = cls(pid, ours)
        # The compile is bounded by the run's CPU limit (`_prepare`); the wall clock here.
        ours.settimeout(limits["wall_s"] + ANSWER_S)
        try:
            if ours.recv(16) == b"ready":
                ours.settimeout(ANSWER_S)
                server.held_bytes = _private_bytes(pid)
                return server
        except OSError:
            pass
        server.close()
        return None

    def launch(self, scratch: str, fds: tuple[int, int, int, int], key: bytes) -> int:
        """Have the server fork the run on these descriptors; its pid."""
        fd_bytes = b"".join(fd.to_bytes(4, sys.byteorder) for fd in fds)
        try:
            self.sock.sendmsg(
                [key + scratch.encode()],
                [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fd_bytes)],
            )
            answer = self.sock.recv(32)
            return int(answer)
        except (OSError, ValueError):
            self.close()
            raise Lost("the case server did not fork the run") from None

    def reap(self) -> tuple[int, float, int]:
        """After the run's process ended (or was killed): (wait status, CPU s, max RSS kB)."""
        try:
            self.sock.send(b"reap")
            status, cpu_s, maxrss = protocol.loads(self.sock.recv(256))
            return int(status), float(cpu_s), int(maxrss)
        except (OSError, ValueError, TypeError):
            self.close()
            raise Lost("the case server did not reap the run") from None

    def close(self) -> None:
        """End the server (it exits when its socket closes; killed if it does not) and reap it."""
        try:
            self.sock.close()
        except OSError:
            pass
        try:
            os.kill(self.pid, 9)
        except ProcessLookupError:
            pass
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass


def _serve(
    sock: Any, unit: dict[str, Any], limits: dict[str, Any], ctx: dict[str, Any], child: Callable
) -> None:
    """The server's life, in the fork of the worker. Never returns."""
    try:
        syscalls.prctl(syscalls.PR_SET_PDEATHSIG, 9)  # never outlives the worker
        began = _cpu_s()
        start = _prepare(unit, limits, ctx)
        case_limit = min(limits["wall_s"], limits.get("test_wall_s") or limits["wall_s"])
        if _cpu_s() - began > COMPILE_SHARE * case_limit:
            os._exit(0)
        sock.send(b"ready")
        while True:
            data, ancillary, _, _ = sock.recvmsg(4096, _socket.CMSG_SPACE(_FDS * 4))
            if not data:
                break
            fds = [
                int.from_bytes(payload[i : i + 4], sys.byteorder)
                for level, kind, payload in ancillary
                if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS
                for i in range(0, len(payload) - 3, 4)
            ]
            if len(fds) != _FDS:
                break
            key, scratch = data[:16], data[16:].decode()
            if ctx["next_pid"] is not None:  # each case's pid says nothing of the case before
                ctx["next_pid"].scramble()
            pid = os.fork()
            if pid == 0:
                sock.close()
                child(unit, limits, ctx, scratch, *fds, key, start)
            for fd in fds:
                os.close(fd)
            sock.send(b"%d" % pid)
            if sock.recv(16) != b"reap":
                os.kill(pid, 9)
            _, status, usage = os.wait4(pid, 0)
            sock.send(protocol.dumps([status, usage.ru_utime + usage.ru_stime, usage.ru_maxrss]))
    except BaseException:  # noqa: BLE001 - the worker sees the socket close and runs the case
        pass
    os._exit(0)


def _prepare(unit: dict[str, Any], limits: dict[str, Any], ctx: dict[str, Any]) -> Callable:
    """`harness.prepare_unit`, with the compile of the candidate's source bounded as in a run:
    the same address space and CPU time (soft limits, lifted again after)."""
    cpu_was, as_was = (
        resource.getrlimit(resource.RLIMIT_CPU),
        resource.getrlimit(resource.RLIMIT_AS),
    )
    cpu = limits["cpu_s"] if limits["cpu_s"] is not None else limits["wall_s"] + 1
    cpu_soft = int(_cpu_s()) + int(cpu) + 1
    address_space = ctx["vm_kb"] * 1024 + limits["memory_mb"] * (1 << 20)
    resource.setrlimit(resource.RLIMIT_CPU, (_within(cpu_soft, cpu_was[1]), cpu_was[1]))
    resource.setrlimit(resource.RLIMIT_AS, (_within(address_space, as_was[1]), as_was[1]))
    start = ctx["prepared"].prepare_unit(unit, ctx["prepared"].parts)
    resource.setrlimit(resource.RLIMIT_CPU, cpu_was)
    resource.setrlimit(resource.RLIMIT_AS, as_was)
    return start


def _within(soft: int, hard: int) -> int:
    return soft if hard == resource.RLIM_INFINITY else min(soft, hard)


def _cpu_s() -> float:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def _private_bytes(pid: int) -> int:
    """The process's private resident memory (what it copied or allocated since its fork)."""
    total = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as fh:
            for line in fh:
                if line.startswith((b"Private_Clean:", b"Private_Dirty:")):
                    total += int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return 0
    return total
