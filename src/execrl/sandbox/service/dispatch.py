"""Streaming execution for a service: jobs arrive one at a time and each gets a Future.

`WorkerPool.run_many` takes a whole batch and returns when all of it is done, which suits
training loops. A server receives runs one request at a time, so `Dispatcher` keeps one thread
per worker of a `WorkerPool`, each holding its worker for the dispatcher's life and feeding it from one
bounded queue, two requests deep like `run_many` (so the worker never waits for the parent to
grade). The queue is bounded: `submit` raises `QueueFull` instead of building a backlog, and the
caller (the server) answers 503 with Retry-After. A worker that dies mid-run gives that run
SANDBOX_ERROR, retried up to `SandboxConfig.max_retries` times on the replacement.

`Backend` is what the server needs of an execution backend; `Dispatcher` and
`ray_backend.RaySandbox` are the two.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol

from execrl.sandbox import pool
from execrl.sandbox.grading import run_outcome
from execrl.sandbox.grading.job import Job
from execrl.sandbox.grading.verdict import ExecutionResult, SandboxErrorCause, Verdict


class QueueFull(RuntimeError):
    """The backend's queue is full: try again later (the server answers 503)."""


class Closed(RuntimeError):
    """The backend is shutting down and takes no new work."""


class Backend(Protocol):
    def submit_many(self, jobs: Sequence[Job]) -> list[Future[ExecutionResult]]: ...
    def queue_depth(self) -> int: ...
    def in_flight(self) -> int: ...
    def describe(self) -> dict[str, Any]: ...
    def close(self, cancel: bool = False) -> None: ...


@dataclass(slots=True)
class _Item:
    job: Job
    future: Future[ExecutionResult]
    attempt: int = 1
    deaths: int = 0  # workers that died running this job
    started: bool = False  # the future is marked running (a caller can no longer cancel it)
    queued_at: float = field(default_factory=time.monotonic)


class Dispatcher:
    """A `WorkerPool`'s workers fed from one bounded queue. Owns the pool: closes it."""

    def __init__(self, sandbox: pool.WorkerPool, max_queue: int = 256) -> None:
        self.sandbox = sandbox
        self.max_queue = max_queue
        self._queue: deque[_Item] = deque()
        self._cond = threading.Condition()
        self._closing = False
        self._cancel = False
        self._busy = 0
        self._threads = [
            threading.Thread(target=self._feed, name=f"execrl-feed-{n}", daemon=True)
            for n in range(sandbox.config.workers)
        ]
        for t in self._threads:
            t.start()

    # -- the Backend interface -------------------------------------------------------------

    def submit(self, job: Job) -> Future[ExecutionResult]:
        return self.submit_many([job])[0]

    def submit_many(self, jobs: Sequence[Job]) -> list[Future[ExecutionResult]]:
        """Queue every job or none: QueueFull if they do not all fit."""
        items = [_Item(job, Future()) for job in jobs]
        with self._cond:
            if self._closing:
                raise Closed("the sandbox is shutting down")
            if len(self._queue) + len(items) > self.max_queue:
                raise QueueFull(
                    f"{len(self._queue)} runs queued, the limit is {self.max_queue}; retry later"
                )
            self._queue.extend(items)
            self._cond.notify(len(items))
        return [i.future for i in items]

    def queue_depth(self) -> int:
        return len(self._queue)

    def in_flight(self) -> int:
        return self._busy

    def describe(self) -> dict[str, Any]:
        sb = self.sandbox
        return {
            "backend": "local",
            "workers": sb.config.workers,
            "worker_pids": sb.worker_pids(),
            "worker_uids": sb.worker_uids(),
            "layers": list(sb.layers),
            "worker_restarts": sb.stats.worker_restarts,
            "retries": sb.stats.retries,
        }

    def close(self, cancel: bool = False) -> None:
        """Stop taking work; finish what is queued (or, with cancel, fail it as SANDBOX_ERROR
        "shutting down"), then stop the workers. No process of the sandbox outlives this."""
        with self._cond:
            self._closing = True
            self._cancel = cancel
            self._cond.notify_all()
        for t in self._threads:
            t.join()
        self.sandbox.close()

    # -- the feeding threads ---------------------------------------------------------------

    def _take(self, block: bool) -> _Item | None:
        with self._cond:
            while True:
                if self._cancel:
                    while self._queue:
                        item = self._queue.popleft()
                        if not item.future.cancelled():
                            item.future.set_result(_shutdown(item))
                while self._queue:
                    item = self._queue.popleft()
                    if not item.started:
                        if not item.future.set_running_or_notify_cancel():
                            continue  # the caller went away before the run started
                        item.started = True
                    self._busy += 1
                    return item
                if not block or self._closing:
                    return None
                self._cond.wait()

    def _requeue(self, item: _Item) -> None:
        with self._cond:
            self._busy -= 1
            self._queue.appendleft(item)
            self._cond.notify()

    def _done(self, item: _Item, result: ExecutionResult) -> None:
        with self._cond:
            self._busy -= 1
        self.sandbox._count(result)
        item.future.set_result(result)

    def _feed(self) -> None:
        sb = self.sandbox
        worker = sb._idle.get()
        inflight: deque[_Item] = deque()
        try:
            while True:
                while len(inflight) < pool.PIPELINE_DEPTH:
                    item = self._take(block=not inflight)
                    if item is None:
                        break
                    try:
                        payload = pool.encode_request(item.job)
                    except Exception as exc:  # noqa: BLE001 - e.g. a toolchain that vanished
                        with self._cond:
                            self._busy -= 1
                        item.future.set_exception(exc)
                        continue
                    if inflight and len(payload) > pool.PIPELINE_BYTES:
                        self._requeue(item)
                        break
                    inflight.append(item)
                    if not pool.write_request(worker, payload):
                        break
                if not inflight:
                    if self._closing:
                        return
                    continue
                worker = self._finish_one(worker, inflight)
        finally:
            for item in inflight:  # only after an unexpected error: never leave a caller waiting
                self._done(item, run_outcome.infra_error(item.job, item.attempt))
            sb._idle.put(worker)

    def _finish_one(self, worker: Any, inflight: deque[_Item]) -> Any:
        sb = self.sandbox
        item = inflight.popleft()
        raws = pool.read_reply(worker, pool.deadline_s(item.job, sb.config.hang_s))
        if raws is None:  # the worker died or hung: an infra error; the others never ran
            item.deaths += 1
            result = run_outcome.infra_error(item.job, item.attempt, worker.retiring)
        else:
            worker.runs += 1
            result = run_outcome.grade_safely(item.job, raws, item.attempt)
        if raws is None or worker.retiring:  # the worker is gone or going: a fresh one
            for other in reversed(inflight):
                self._requeue(other)
            inflight.clear()
            try:
                worker = sb._replace(worker, graceful=raws is not None)
            except BaseException:
                self._done(item, result)
                raise
        if result.verdict is Verdict.SANDBOX_ERROR and item.attempt <= sb.config.max_retries:
            with sb._stats_lock:
                sb.stats.retries += 1
            item.attempt += 1
            self._requeue(item)
            return worker
        self._done(item, run_outcome.killed_every_worker(item.job, result, item.deaths))
        return worker


def _shutdown(item: _Item) -> ExecutionResult:
    return ExecutionResult(
        Verdict.SANDBOX_ERROR,
        n_tests=len(item.job.tests),
        message="the sandbox shut down before this run started",
        attempts=item.attempt,
        sandbox_error_cause=SandboxErrorCause.SHUTDOWN,
    )
