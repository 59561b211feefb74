"""Worker processes for the execution-free analyses, and the pool that feeds them.

Each worker is a fresh interpreter running `main()` below, as the sandbox's workers are, and
not a multiprocessing child: a forked child would copy the trainer (its threads' held locks, a
model's memory), and forkserver and spawn children re-run the caller's main script, which a
training script without a `__main__` guard cannot survive. The protocol is length-prefixed
pickles on the worker's stdin and stdout, one request and one reply at a time (a frame that
fails to unpickle leaves the stream in step):

    parent -> worker   sys.path (once), then (analyses, programs) per request
    worker -> parent   ("ok", [results per program]) or ("error", text)

The parent trusts what comes back: the worker analyses untrusted programs but never runs them.

A program can still make an analyser hang (a regex that backtracks) or die; one such completion
must not abort a scoring step, nor cost its peers their scores. A request unanswered after
`answer_s(n)` seconds kills its worker. Then the pool finds the culprit: a fresh worker analyses a
control program (if that fails too, the failure is the pool's and is raised), then each program
of the request alone; one that kills or stalls a worker by itself gets a `Failed` it is at fault
for (its leaves give -max_penalty), and the others their results.
"""

from __future__ import annotations

import os
import pickle
import queue
import signal
import socket
import struct
import subprocess
import sys
import threading
import traceback
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

from execrl.rewards.analysis.analysis import Analysis, AnalysisError, Failed, analyse_many

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])  # the directory holding `execrl`


class WorkerDied(AnalysisError):
    """The worker process ended while it owed a reply, or stopped answering."""


CONTROL = "def f(x):\n    return x + 1\n"  # a program every analysis handles in milliseconds


def answer_s(n_programs: int) -> float:
    """How long a request of `n_programs` may take: the analyses cost milliseconds a program,
    so this is thousands of times that, room for a machine loaded many times over."""
    return 60.0 + 1.0 * n_programs


_HEADER = struct.Struct("!Q")


def write_frame(pipe: IO[bytes], message: object) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    pipe.write(_HEADER.pack(len(data)) + data)
    pipe.flush()


def read_frame(pipe: IO[bytes]) -> bytes:
    """One frame's bytes; EOFError when the other side is gone."""
    head = pipe.read(_HEADER.size)
    if len(head) < _HEADER.size:
        raise EOFError("pipe closed")
    (size,) = _HEADER.unpack(head)
    data = pipe.read(size)
    if len(data) < size:
        raise EOFError("pipe closed mid-frame")
    return data


class _Worker:
    """One worker process and its socket; used by one thread at a time."""

    def __init__(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH", "")) if p
        )
        # A socket pair, not pipes: the sandbox's runs may have this process's uid (no uid
        # layer), and a pipe of this process can be opened again through /proc/<pid>/fd, where
        # a forged frame would be unpickled here. A socket cannot be reopened.
        self._sock, theirs = socket.socketpair()
        try:
            self.proc = subprocess.Popen(
                # -c, not -m: running a module of an imported package as __main__ loads it twice
                [
                    sys.executable,
                    "-c",
                    "from execrl.rewards.analysis.analysis_worker import main; main()",
                ],
                stdin=theirs,
                stdout=theirs,
                env=env,
                close_fds=True,
            )
        finally:
            theirs.close()
        self._rfile, self._wfile = self._sock.makefile("rb"), self._sock.makefile("wb")
        # the caller's sys.path, so analyses defined in its modules unpickle in the worker
        try:
            self._send([p for p in sys.path if isinstance(p, str)])
        except OSError as exc:
            raise WorkerDied(f"it did not start: {exc}; {self._how_it_ended()}") from exc

    def _send(self, message: object) -> None:
        write_frame(self._wfile, message)

    def call(self, analyses: Sequence[Analysis], programs: Sequence[str]) -> list[Any]:
        try:
            data = (tuple(analyses), list(programs))
            pickle.dumps(data[0])
        except (pickle.PicklingError, AttributeError, TypeError) as exc:
            raise AnalysisError(
                f"the analyses {[a.name for a in analyses]} cannot be sent to a worker process "
                f"({exc}): an Analysis's function must be defined at module level; or set "
                "reward.analysis_workers = 0"
            ) from exc
        try:
            self._sock.settimeout(answer_s(len(programs)))
            self._send(data)
            kind, payload = pickle.loads(read_frame(self._rfile))
        except TimeoutError as exc:
            self.proc.kill()  # stuck in an analysis: it would not read a closed input
            self.close()
            raise WorkerDied(f"it did not answer within {answer_s(len(programs)):g} s") from exc
        except (OSError, ValueError, EOFError, pickle.UnpicklingError) as exc:
            raise WorkerDied(self._how_it_ended()) from exc
        if kind != "ok":
            raise AnalysisError(f"an analysis worker could not run the analyses: {payload}")
        return payload

    def _how_it_ended(self) -> str:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.close()
            return "it stopped answering"
        if code < 0:
            name = signal.Signals(-code).name
            hint = " (out of memory?)" if name == "SIGKILL" else ""
            return f"killed by {name}{hint}"
        return f"exit code {code}"

    def close(self) -> None:
        try:
            self._wfile.close()
            self._sock.shutdown(socket.SHUT_WR)
        except (OSError, ValueError):
            pass
        try:
            self.proc.wait(timeout=5)  # its input ended: the worker's loop ends
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for f in (self._rfile, self._sock):
            try:
                f.close()
            except OSError:
                pass


class WorkerPool:
    """`submit(analyses, programs)` -> a Future of the results, run by one of `workers`
    processes, started on first use. A dead worker fails its request with `WorkerDied` and is
    replaced on the next request."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._idle: queue.SimpleQueue[_Worker | None] = queue.SimpleQueue()
        for _ in range(workers):
            self._idle.put(None)  # None: not started yet
        # Threads only wait on pipes (no GIL held); one per worker, so none waits for a worker.
        self._threads = ThreadPoolExecutor(workers, thread_name_prefix="execrl-analysis")
        self._all: list[_Worker] = []
        self._lock = threading.Lock()

    def submit(self, analyses: Sequence[Analysis], programs: Sequence[str]) -> Future[list[Any]]:
        return self._threads.submit(self._run, tuple(analyses), list(programs))

    def _run(self, analyses: tuple[Analysis, ...], programs: list[str]) -> list[Any]:
        try:
            return self._call(analyses, programs)
        except WorkerDied:
            self._call(analyses, [CONTROL])  # raises (the pool's failure) if this dies too
            return [self._alone(analyses, program) for program in programs]

    def _alone(self, analyses: tuple[Analysis, ...], program: str) -> Any:
        """One program's results, or `Failed` results when it kills or stalls a worker alone."""
        try:
            return self._call(analyses, [program])[0]
        except WorkerDied as exc:
            why = f"the analysis worker failed on this program alone: {exc}"
            return tuple(Failed(why, programs_fault=True) for _ in analyses)

    def _call(self, analyses: tuple[Analysis, ...], programs: list[str]) -> list[Any]:
        worker = self._idle.get()
        try:
            if worker is None:
                worker = _Worker()
                with self._lock:
                    self._all.append(worker)
            return worker.call(analyses, programs)
        except WorkerDied:
            with self._lock:
                if worker in self._all:
                    self._all.remove(worker)
            worker = None  # replaced by a new process on the next request
            raise
        finally:
            self._idle.put(worker)

    def close(self) -> None:
        self._threads.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            for w in self._all:
                w.close()
            self._all.clear()


def _serve(requests: IO[bytes], replies: IO[bytes]) -> None:
    """The worker's loop: until stdin closes, analyse each request's programs."""
    try:
        paths = pickle.loads(read_frame(requests))
    except EOFError:
        return
    sys.path[:0] = [p for p in paths if p not in sys.path]
    while True:
        try:
            frame = read_frame(requests)
        except EOFError:
            return
        try:
            analyses, programs = pickle.loads(frame)
            reply: tuple[str, Any] = ("ok", analyse_many(programs, analyses))
        except Exception:  # noqa: BLE001 - e.g. an analysis function it cannot import
            reply = ("error", traceback.format_exc(limit=3))
        write_frame(replies, reply)


def main() -> None:
    # Ctrl-C reaches the whole process group: the parent handles it and closes the workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The reply channel is a private copy of stdout; fd 1 goes to stderr, so an analyser that
    # prints cannot corrupt a reply.
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    _serve(sys.stdin.buffer, replies)
