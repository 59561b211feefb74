"""The sandbox pool, transport only: N pre-warmed fork-server workers, a thread each, retries for
infra failures. Each job's units run on one worker and come back graded as the job's own tests
grade them (`grade.py`); which runs a job needs (a checker program's, a verifier's, windows of
cases) is decided above, by the runner (`runner.py`), never here."""

from __future__ import annotations

import os
import queue
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from execrl.sandbox.config import SandboxConfig
from execrl.sandbox.confine import hidden_paths, isolation, memcg
from execrl.sandbox.grading.job import Job
from execrl.sandbox.grading.run_outcome import grade_safely, infra_error, killed_every_worker
from execrl.sandbox.grading.verdict import ExecutionResult, Verdict
from execrl.sandbox.run import protocol
from execrl.tasks.schema import StdioTests


class SandboxUnavailable(RuntimeError):
    """The sandbox cannot start with the isolation that was asked for."""


@dataclass(slots=True)
class _Worker:
    proc: subprocess.Popen[bytes]
    # The worker's stdin and stdout are one end of a socket pair, never pipes: without the uid
    # layer a run has the user's own uid, and a pipe of this process can be opened again for
    # writing through /proc/<pid>/fd, where a forged reply would pass. A socket cannot be.
    sock: socket.socket
    rfile: Any  # buffered reader and writer over `sock`
    wfile: Any
    uid: int | None
    lease: isolation.UidLease | None = None
    memcg: str | None = None  # the worker's memory cgroup (`memcg`), removed with it
    runs: int = 0
    # The worker's pid: not `proc`'s where the worker is pid 1 of a namespace of its own
    # (`isolation._become_init`): `proc` then only waits for it.
    pid: int = 0
    retiring: str = ""  # the worker said it takes no further run, and why (`worker.main`)


@dataclass(slots=True)
class SandboxStats:
    runs: int = 0
    retries: int = 0
    sandbox_errors: int = 0
    worker_restarts: int = 0
    verdicts: dict[str, int] = field(default_factory=dict)
    sandbox_error_causes: dict[str, int] = field(default_factory=dict)  # SandboxErrorCause: n
    possible_hacks: int = 0  # runs flagged `ExecutionResult.possible_hack`


class WorkerPool:
    """Runs jobs on confined workers, each job as it is (its tests as the harness runs them).
    Use as a context manager; `runner.Sandbox` is the pool with the runner above it."""

    def __init__(self, config: SandboxConfig | None = None, **overrides: Any) -> None:
        base = config or SandboxConfig()
        self.config = SandboxConfig(
            **{**{f: getattr(base, f) for f in base.__slots__}, **overrides}
        )
        self.layers = self._choose_layers()
        # How a run's memory is bound: "cgroup v1"/"cgroup v2" (the whole run), or "rlimit"
        # (each process alone), with why (`execrl sandbox doctor` shows it).
        self.memory_mode, self.memory_detail = memcg.probe()
        self._memcg_count = 0
        self.stats = SandboxStats()
        self._stats_lock = threading.Lock()
        self._hide = (
            list(self.config.hide) if self.config.hide is not None else hidden_paths.default_hide()
        )
        # Compiled binaries (C, C++, Verilog), shared by the workers: a source compiles once.
        self._bin_dir = tempfile.mkdtemp(prefix="execrl-bin-")
        os.chmod(self._bin_dir, 0o711)
        self._keep = [*hidden_paths.default_keep(), self._bin_dir]
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._all: list[_Worker] = []
        self._closed = False
        self._shielded = "uid" not in self.layers
        if self._shielded:
            _shield.enter()
        try:
            for _ in range(self.config.workers):
                w = self._start_worker()
                self._all.append(w)
                self._idle.put(w)
        except BaseException:
            self.close()
            raise

    def _choose_layers(self) -> tuple[str, ...]:
        status = {s.name: s for s in isolation.probe_layers()}
        unknown = [name for name in self.config.layers if name not in status]
        if unknown:
            raise SandboxUnavailable(f"unknown isolation layer(s) {unknown}; known: {list(status)}")
        missing = [status[n] for n in self.config.layers if not status[n].available]
        if missing and not self.config.allow_missing_layers:
            lines = "\n".join(f"  {m.name}: {m.detail}" for m in missing)
            raise SandboxUnavailable(
                f"required isolation layers are unavailable on this host:\n{lines}\n"
                "Run `execrl sandbox doctor` for details, or opt out with allow_missing_layers=True "
                "(--allow-weaker-sandbox on the command line)."
            )
        return tuple(n for n in self.config.layers if status[n].available)

    def _start_worker(self) -> _Worker:
        lease = isolation.UidLease() if "uid" in self.layers else None
        env = {
            "PATH": isolation.ENV_PATH,
            "LANG": "C.UTF-8",
            "PYTHONHASHSEED": "0",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
        }
        cgroup = self._new_memcg()
        sock, theirs = socket.socketpair()
        try:
            proc = subprocess.Popen(
                [sys.executable, "-S", "-m", "execrl.sandbox.run.worker"],
                stdin=theirs,
                stdout=theirs,
                env=env,
                cwd="/",
                close_fds=True,
                # Its own process group: a terminal's Ctrl-C is the parent's to act on (finish
                # the step, then close the pool); sent to the workers too, each printed a
                # KeyboardInterrupt traceback and died under the step it was running
                process_group=0,
            )
        finally:
            theirs.close()
        rfile, wfile = sock.makefile("rb"), sock.makefile("wb")
        config = {
            "layers": list(self.layers),
            "hide": self._hide,
            "keep": self._keep,
            "scratch_mb": self.config.limits.scratch_mb,  # until a job asks for another
            "uid": lease.uid if lease else None,
            # Not root: the network and filesystem layers live in a user namespace.
            "userns": os.geteuid() != 0 and bool({"network", "filesystem"} & set(self.layers)),
            "bin_dir": self._bin_dir,
            "memcg": list(cgroup) if cgroup else None,
            "case_server": self.config.case_server,
        }
        worker = _Worker(proc, sock, rfile, wfile, lease.uid if lease else None, lease)
        worker.memcg = cgroup[0] if cgroup else None
        try:
            protocol.write_message(wfile, config)
            reply = protocol.read_message(rfile)
        except (OSError, EOFError) as exc:
            reply = {"t": "error", "msg": f"worker died while starting: {exc}"}
        if not reply or reply.get("t") != "ready":
            _retire(worker, graceful=False)
            msg = reply.get("msg") if reply else "worker exited while starting"
            raise SandboxUnavailable(f"sandbox worker failed to start: {msg}")
        worker.pid = reply.get("pid") or proc.pid
        return worker

    def _new_memcg(self) -> tuple[str, int] | None:
        if self.memory_mode == "rlimit":
            return None
        with self._stats_lock:
            self._memcg_count += 1
            tag = str(self._memcg_count)
        try:
            return memcg.create(tag)
        except OSError as exc:
            raise SandboxUnavailable(f"cannot make a worker's memory cgroup: {exc}") from None

    # -- running ---------------------------------------------------------------------------

    def run(self, job: Job) -> ExecutionResult:
        return self.run_many([job])[0]

    def run_many(
        self,
        jobs: Sequence[Job],
        progress: Callable[[int], None] | None = None,
    ) -> list[ExecutionResult]:
        """Each job in one request to one worker, `workers` at a time; results in the order of
        `jobs`. Safe to call from several threads at once: they share the workers."""
        if self._closed:
            raise RuntimeError("the sandbox is closed")
        results: list[ExecutionResult | None] = [None] * len(jobs)
        # (job, attempt, workers that died running it)
        todo: deque[tuple[int, int, int]] = deque((i, 1, 0) for i in range(len(jobs)))
        lock = threading.Lock()
        errors: list[BaseException] = []

        def finish(i: int, result: ExecutionResult) -> None:
            results[i] = result
            self._count(result)
            if progress is not None:
                progress(1)

        def drive() -> None:
            try:
                self._drive(jobs, todo, lock, finish)
            except BaseException as exc:  # noqa: BLE001 - surfaced after the join
                errors.append(exc)

        n_threads = min(self.config.workers, len(jobs))
        threads = [threading.Thread(target=drive, daemon=True) for _ in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        return [r for r in results if r is not None]

    def _drive(
        self,
        jobs: Sequence[Job],
        todo: deque[tuple[int, int, int]],
        lock: threading.Lock,
        finish: Callable[[int, ExecutionResult], None],
    ) -> None:
        """Feed one worker until no job is left, keeping a second request queued behind the
        running one, so the worker never waits for the parent to grade."""
        worker = self._idle.get()
        try:
            inflight: deque[tuple[int, int, int]] = deque()
            while True:
                while len(inflight) < PIPELINE_DEPTH:
                    with lock:
                        if not todo:
                            break
                        item = todo.popleft()
                    payload = encode_request(jobs[item[0]])
                    # A second request must fit in the socket's buffer, or writing it could block
                    # while the worker blocks writing its reply.
                    if inflight and len(payload) > PIPELINE_BYTES:
                        with lock:
                            todo.appendleft(item)
                        break
                    inflight.append(item)
                    if not write_request(worker, payload):
                        break
                if not inflight:
                    return
                i, attempt, deaths = inflight.popleft()
                raws = read_reply(worker, deadline_s(jobs[i], self.config.hang_s))
                if raws is None:  # the worker died: this run is an infra error, the rest never ran
                    deaths += 1
                    result = infra_error(jobs[i], attempt, worker.retiring)
                else:
                    worker.runs += 1
                    result = grade_safely(jobs[i], raws, attempt)
                if raws is None or worker.retiring:  # the others queued there never ran
                    worker = self._replace(worker, graceful=raws is not None)
                    with lock:
                        todo.extendleft(reversed(inflight))
                    inflight.clear()
                if result.verdict is Verdict.SANDBOX_ERROR and attempt <= self.config.max_retries:
                    with self._stats_lock:
                        self.stats.retries += 1
                    with lock:
                        todo.appendleft((i, attempt + 1, deaths))
                    continue
                finish(i, killed_every_worker(jobs[i], result, deaths))
        finally:
            self._idle.put(worker)

    def _count(self, result: ExecutionResult) -> None:
        with self._stats_lock:
            self.stats.runs += 1
            v = result.verdict.value
            self.stats.verdicts[v] = self.stats.verdicts.get(v, 0) + 1
            if result.verdict is Verdict.SANDBOX_ERROR:
                self.stats.sandbox_errors += 1
                cause = result.sandbox_error_cause or "unknown"
                causes = self.stats.sandbox_error_causes
                causes[cause] = causes.get(cause, 0) + 1
            if result.possible_hack:
                self.stats.possible_hacks += 1

    def _replace(self, dead: _Worker, graceful: bool = False) -> _Worker:
        _retire(dead, graceful=graceful)
        fresh = self._start_worker()
        with self._stats_lock:
            self.stats.worker_restarts += 1
            self._all[self._all.index(dead)] = fresh
        return fresh

    def worker_pids(self) -> list[int]:
        return [w.pid for w in self._all]

    def worker_uids(self) -> list[int]:
        """The uids programs run under (empty without the uid layer)."""
        return [w.uid for w in self._all if w.uid is not None]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for w in self._all:
            _retire(w, graceful=True)
        shutil.rmtree(self._bin_dir, ignore_errors=True)
        if getattr(self, "_shielded", False):
            _shield.leave()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            self.close()


class _Shield:
    """Without the uid layer the runs have this process's uid, and a process of the same uid
    may read this one's /proc entries (its environment: the user's API keys; its open files)
    and trace it. While such a sandbox is open this process is not dumpable, which makes those
    entries root's and refuses the tracing; debuggers of the same user cannot attach either."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open = 0
        self._before = 1

    def enter(self) -> None:
        from execrl.sandbox.confine import syscalls

        with self._lock:
            if self._open == 0:
                self._before = syscalls.prctl_get(syscalls.PR_GET_DUMPABLE)
                syscalls.prctl(syscalls.PR_SET_DUMPABLE, 0)
            self._open += 1

    def leave(self) -> None:
        from execrl.sandbox.confine import syscalls

        with self._lock:
            self._open -= 1
            if self._open == 0 and self._before:
                syscalls.prctl(syscalls.PR_SET_DUMPABLE, self._before)


_shield = _Shield()


def _retire(w: _Worker, graceful: bool) -> None:
    """Stop a worker (the end of its input ends it cleanly), kill what its runs left, free its
    uid."""
    try:
        if not graceful:
            raise OSError
        w.wfile.close()
        w.sock.shutdown(socket.SHUT_WR)
        w.proc.wait(timeout=5)
    except (OSError, ValueError, subprocess.TimeoutExpired):
        w.proc.kill()
        w.proc.wait()
    if w.uid is not None:
        isolation.reap_uid(w.uid)
    if w.lease:
        w.lease.release()
    if w.memcg:
        memcg.remove(w.memcg)
    for f in (w.wfile, w.rfile, w.sock):
        try:
            f.close()
        except OSError:
            pass


# The pipe protocol with a worker, shared by the pool's loop and `dispatch`: up to
# PIPELINE_DEPTH requests in flight per worker, one behind another only under PIPELINE_BYTES.
PIPELINE_DEPTH = 2
PIPELINE_BYTES = 16 << 10


def encode_request(job: Job) -> bytes:
    body = protocol.dumps({"t": "run", "units": job.units(), "limits": job.limits.to_wire()})
    return protocol.frame(body)


def write_request(worker: _Worker, payload: bytes) -> bool:
    try:
        worker.wfile.write(payload)
        worker.wfile.flush()
        return True
    except (OSError, ValueError):  # ValueError: written to after the worker was retired
        return False


def deadline_s(job: Job, hang_s: float) -> float:
    """The longest a worker may take to answer `job` (queued behind nothing: the reply before
    it was read first): each unit's wall clock and compile, and `hang_s` for the rest."""
    units = len(job.tests) if isinstance(job.tests, StdioTests) else 1
    compile_s = job.limits.compile_wall_s if job.language != "python" else 0.0
    return units * (job.limits.wall_s + compile_s) + hang_s


def read_reply(worker: _Worker, timeout_s: float | None = None) -> list[dict[str, Any]] | None:
    """The units of the worker's next reply; None when it died, hung past `timeout_s` (then
    `retiring` says so) or answered with something else."""
    try:
        worker.sock.settimeout(timeout_s)
        reply = protocol.read_message(worker.rfile)
    except TimeoutError:
        worker.retiring = f"hung: no answer within {timeout_s:g}s"
        return None
    except (OSError, EOFError, ValueError):
        return None
    finally:
        try:
            worker.sock.settimeout(None)
        except OSError:
            pass
    if not reply or reply.get("t") != "result":
        return None
    worker.retiring = str(reply.get("retire") or "")
    return reply["units"]
