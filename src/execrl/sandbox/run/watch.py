"""The worker's watch over one run: its channel (a socket pair), and the loop that reads the
run's channel, stdout and stderr until it exits, enforcing the wall clock, the per-test clock and
the output caps, and kills it at any of them. Moved out of `worker` unchanged; the worker imports
it: standard library only, no typing.
"""

from __future__ import annotations

import _socket
import math
import os
import select
import signal
import time

from execrl.sandbox.run import protocol

TYPE_CHECKING = False  # typing stays out of the worker
if TYPE_CHECKING:
    from typing import Any

# Returned values of one run, all tests together: HumanEval+'s HumanEval/15 returns 147 MB over
# its tests (its plus inputs build long strings), HumanEval/130 114 MB.
CHANNEL_CAP = 256 << 20
LAZY_CHANNEL_S = 0.05


def watch_run(
    pid: int,
    ch_r: int,
    out_r: int,
    err_r: int,
    limits: dict[str, Any],
    t0: float,
    reader: protocol.ChannelReader,
) -> dict[str, Any]:
    """Read the child's channel and output until it exits, enforcing wall clock and caps."""
    state: dict[str, Any] = {
        "channel": bytearray(),
        "stdout": bytearray(),
        "stderr": bytearray(),
        "timed_out": False,
        "output_limit": False,
        "fds": {ch_r: "channel", out_r: "stdout", err_r: "stderr"},
    }
    caps = {
        "channel": CHANNEL_CAP,
        "stdout": limits["output_bytes"],
        "stderr": limits["output_bytes"],
    }
    deadline = t0 + limits["wall_s"]
    test_wall = limits.get("test_wall_s")
    pidfd = os.pidfd_open(pid)
    poller = select.poll()
    for fd in state["fds"]:
        os.set_blocking(fd, False)
    # Without per-test deadlines the channel need not wake us at every message (each wake-up
    # costs a context switch on both sides): it is read at exit and every LAZY_CHANNEL_S, from
    # a socket buffer large enough that a child rarely waits on it (`_channel`).
    lazy = test_wall is None
    for fd in state["fds"]:
        if not (lazy and fd == ch_r):
            poller.register(fd, select.POLLIN)
    poller.register(pidfd, select.POLLIN)
    test_deadline = math.inf
    try:
        while True:
            limit = min(deadline, test_deadline)
            now = time.monotonic()
            if now >= limit:
                state["timed_out"] = "test" if test_deadline < deadline else "run"
                kill(pid)
                return state
            exited = False
            wait_s = min(limit - now, LAZY_CHANNEL_S) if lazy else limit - now
            events = poller.poll(max(1, int(wait_s * 1000) + 1))
            if lazy:
                before = len(state["channel"])
                if not _read_all(ch_r, state["channel"], caps["channel"]):
                    state["output_limit"] = "channel"
                    kill(pid)
                    return state
                if len(state["channel"]) > before and not events:
                    # A long run that talks (large outputs): read it as it comes from now on.
                    lazy = False
                    poller.register(ch_r, select.POLLIN)
            for fd, _ in events:
                if fd == pidfd:
                    exited = True
                    continue
                name = state["fds"][fd]
                if not _read_some(fd, state[name]):
                    poller.unregister(fd)
                elif len(state[name]) > caps[name]:
                    state["output_limit"] = name
                    kill(pid)
                    return state
            # Only the harness's own (sealed) start and stop messages start and stop the
            # per-test clock: carrying a returned value out (HumanEval/130's are megabytes) is
            # not the test's time. The reader goes on from where it stopped, so large outputs
            # are not read twice.
            if test_wall is not None and reader.feed(state["channel"]):
                test_deadline = time.monotonic() + test_wall if reader.clocked else math.inf
            if exited:
                return state
    finally:
        os.close(pidfd)


def channel() -> tuple[int, int]:
    """The harness's channel (read end, write end): a socket pair, never a pipe. A pipe can be
    opened again, for reading, through /proc/self/fd/3; a run under the worker's own uid (no
    uid layer) would read the harness's lines off it before the worker does, and the worker
    would miss them. A socket cannot be reopened."""
    reader, writer = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
    reader.shutdown(_socket.SHUT_WR)
    writer.shutdown(_socket.SHUT_RD)  # nothing to read from fd 3 either
    for sock, option in ((reader, _socket.SO_RCVBUF), (writer, _socket.SO_SNDBUF)):
        try:  # room for the lazy channel (see _watch); the kernel caps it at its maximum
            sock.setsockopt(_socket.SOL_SOCKET, option, 1 << 20)
        except OSError:
            pass
    return reader.detach(), writer.detach()


def _read_all(fd: int, buf: bytearray, cap: int) -> bool:
    """Read what the pipe holds now; False once `buf` is over `cap`."""
    while len(buf) <= cap:
        try:
            chunk = os.read(fd, 1 << 16)
        except OSError:  # BlockingIOError: empty for now, or a leftover process holds it open
            return True
        if not chunk:
            return True
        buf += chunk
    return False


def _read_some(fd: int, buf: bytearray) -> bool:
    try:
        chunk = os.read(fd, 1 << 16)
    except BlockingIOError:
        return True
    if not chunk:
        return False
    buf += chunk
    return True


def drain(state: dict[str, Any], limits: dict[str, Any]) -> None:
    """After the child exits, read what is left in the pipes, within the same caps."""
    for fd, name in state["fds"].items():
        cap = CHANNEL_CAP if name == "channel" else limits["output_bytes"]
        if not _read_all(fd, state[name], cap):
            state["output_limit"] = name


def kill(pid: int) -> None:
    for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            target()
        except ProcessLookupError:
            pass
