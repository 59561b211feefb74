"""The sandbox pool as Ray actors across a Ray cluster (`pip install 'execrl[ray]'`).

Each actor holds a `WorkerPool` of its own (its own fork-server workers, confined as on one
machine; the node must run the actor as root for every isolation layer, and have execrl
installed). Work goes to the actor with the fewest runs outstanding per worker. A run whose
actor is lost (its process or node died) is sent to another actor, a fresh one replacing the
lost; after `max_actor_retries` such losses it is reported as SANDBOX_ERROR, never as the
program's failure. `RaySandbox` is transport, as the pool is: `run` and `run_many` run each job
as it is, and `backend.open_sandbox` puts the runner (`runner.JobRunner`: checkers, verifiers,
first-failure windows) above it, in this process; it also has the server's `Backend` interface
(`execrl sandbox serve --ray ADDRESS`).
"""

from __future__ import annotations

import dataclasses
import math
import os
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from execrl.sandbox.grading.job import Job
from execrl.sandbox.grading.verdict import ExecutionResult, SandboxErrorCause, Verdict
from execrl.sandbox.service.dispatch import Closed, QueueFull


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ImportError("the Ray backend needs Ray: pip install 'execrl[ray]'") from None
    return ray


class SandboxActor:
    """Runs inside a Ray actor process: one local pool."""

    def __init__(self, workers: int, allow_missing_layers: bool, max_retries: int) -> None:
        from execrl.sandbox.pool import WorkerPool

        self.sandbox = WorkerPool(
            workers=workers, allow_missing_layers=allow_missing_layers, max_retries=max_retries
        )

    def run_many(self, jobs: list[Job]) -> list[ExecutionResult]:
        return self.sandbox.run_many(jobs)

    def info(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "worker_pids": self.sandbox.worker_pids(),
            "layers": list(self.sandbox.layers),
            "worker_restarts": self.sandbox.stats.worker_restarts,
        }

    def close(self) -> None:
        self.sandbox.close()


@dataclass(slots=True)
class _Slot:
    handle: Any
    outstanding: int = 0
    alive: bool = True


class RaySandbox:
    """Sandbox actors on a Ray cluster. `address`: a cluster address, "auto", or "local" (or
    None) to start a local Ray instance owned by this object."""

    def __init__(
        self,
        address: str | None = "local",
        actors: int = 2,
        workers_per_actor: int = 1,
        max_queue: int = 1024,
        max_retries: int = 2,
        max_actor_retries: int = 2,
        allow_missing_layers: bool = False,
        cpus_per_actor: float | None = None,
        init_kwargs: dict[str, Any] | None = None,
        start_timeout_s: float = 60.0,
    ) -> None:
        # Each worker runs one program at a time on a core: an actor reserves a CPU per worker
        # (None), so that Ray spreads actors over nodes instead of packing them onto one
        cpus = float(workers_per_actor if cpus_per_actor is None else cpus_per_actor)
        ray = self._ray = _import_ray()
        self._owns_ray = False
        if not ray.is_initialized():
            kwargs = dict(init_kwargs or {})
            kwargs.setdefault("include_dashboard", False)
            kwargs.setdefault("log_to_driver", False)
            if address in (None, "local"):
                self._owns_ray = True
                kwargs.setdefault("_node_ip_address", "127.0.0.1")  # this machine only
                # this machine's cores, or what the actors reserve if more: they start, and
                # share the cores as a local pool of that many workers would
                kwargs.setdefault("num_cpus", max(os.cpu_count() or 1, math.ceil(actors * cpus)))
                ray.init(**kwargs)
            else:
                ray.init(address=address, **kwargs)
        self.workers_per_actor = workers_per_actor
        self.max_queue, self.max_actor_retries = max_queue, max_actor_retries
        self._actor_options = {
            "num_cpus": cpus,
            # run_many calls in threads, as many as the actor has workers (and one queued each)
            "max_concurrency": 2 * workers_per_actor,
        }
        self._actor_args = (workers_per_actor, allow_missing_layers, max_retries)
        self._remote_cls = ray.remote(SandboxActor)
        self._lock = threading.Lock()
        self._outstanding = 0
        self._closing = False
        self.actor_restarts = 0
        self._slots = [self._new_slot() for _ in range(actors)]
        try:  # started, or raise here; an actor Ray cannot place would wait forever
            self._ray.get([s.handle.info.remote() for s in self._slots], timeout=start_timeout_s)
        except ray.exceptions.GetTimeoutError:
            # the cluster's CPUs read before a Ray of our own is shut down with the actors
            message = (
                f"sandbox.backend = 'ray': {actors} actors reserving {cpus:g} CPUs each did not "
                f"start within {start_timeout_s:g} s on the cluster at {address!r} "
                f"({ray.cluster_resources().get('CPU', 0):g} CPUs in all, "
                f"{ray.available_resources().get('CPU', 0):g} free); lower sandbox.ray_actors "
                "or sandbox.ray_cpus_per_actor (0 reserves none), or add nodes"
            )
            self._closing = True
            self._kill_actors()
            raise RuntimeError(message) from None

    def _new_slot(self) -> _Slot:
        return _Slot(self._remote_cls.options(**self._actor_options).remote(*self._actor_args))

    # -- Sandbox-like API ------------------------------------------------------------------

    def run(self, job: Job) -> ExecutionResult:
        return self.run_many([job])[0]

    def run_many(self, jobs: Sequence[Job]) -> list[ExecutionResult]:
        return [f.result() for f in self.submit_many(jobs, bounded=False)]

    # -- Backend ---------------------------------------------------------------------------

    def submit_many(
        self, jobs: Sequence[Job], bounded: bool = True
    ) -> list[Future[ExecutionResult]]:
        with self._lock:
            if self._closing:
                raise Closed("the sandbox is shutting down")
            if bounded and self._outstanding + len(jobs) > self.max_queue:
                raise QueueFull(
                    f"{self._outstanding} runs outstanding, the limit is {self.max_queue}; "
                    "retry later"
                )
            self._outstanding += len(jobs)
        futures: list[Future[ExecutionResult]] = []
        for job in jobs:
            future: Future[ExecutionResult] = Future()
            future.set_running_or_notify_cancel()
            futures.append(future)
            self._dispatch(job, future, losses=0)
        return futures

    def _pick(self) -> _Slot:
        with self._lock:
            live = [s for s in self._slots if s.alive]
            slot = min(live, key=lambda s: s.outstanding)
            slot.outstanding += 1
            return slot

    def _dispatch(self, job: Job, future: Future[ExecutionResult], losses: int) -> None:
        slot = self._pick()
        ref = slot.handle.run_many.remote([job])
        ref.future().add_done_callback(lambda f: self._landed(f, slot, job, future, losses))

    def _landed(
        self, f: Future[Any], slot: _Slot, job: Job, future: Future[ExecutionResult], losses: int
    ) -> None:
        with self._lock:
            slot.outstanding -= 1
        try:
            (result,) = f.result()
            if losses:
                result = dataclasses.replace(result, attempts=result.attempts + losses)
        except self._ray.exceptions.RayActorError as exc:
            self._lost(slot)
            if losses < self.max_actor_retries and not self._closing:
                self._dispatch(job, future, losses + 1)
                return
            result = _lost_result(
                job,
                losses + 1,
                f"the sandbox actor was lost: {exc}",
                SandboxErrorCause.ACTOR_LOST,
            )
        except Exception as exc:  # noqa: BLE001 - an infra failure; the caller gets a verdict
            result = _lost_result(
                job, losses + 1, f"{type(exc).__name__}: {exc}", SandboxErrorCause.BACKEND_ERROR
            )
        with self._lock:
            self._outstanding -= 1
        future.set_result(result)

    def _lost(self, slot: _Slot) -> None:
        with self._lock:
            if not slot.alive or self._closing:
                return
            slot.alive = False
            self.actor_restarts += 1
            self._slots[self._slots.index(slot)] = self._new_slot()

    def queue_depth(self) -> int:
        return max(0, self._outstanding - self.in_flight())

    def in_flight(self) -> int:
        cap = self.workers_per_actor
        return sum(min(s.outstanding, cap) for s in self._slots if s.alive)

    def actor_pids(self) -> list[int]:
        return [i["pid"] for i in self._ray.get([s.handle.info.remote() for s in self._slots])]

    def describe(self) -> dict[str, Any]:
        return {
            "backend": "ray",
            "actors": len(self._slots),
            "workers": len(self._slots) * self.workers_per_actor,
            "worker_restarts": self.actor_restarts,
            "actor_restarts": self.actor_restarts,
        }

    def close(self, cancel: bool = False) -> None:
        """Stop every actor's sandbox (its workers and their uids), then the actors."""
        with self._lock:
            if self._closing:
                return
            self._closing = True
        ray = self._ray
        closing = [s.handle.close.remote() for s in self._slots]
        try:
            ray.get(closing, timeout=60)
        except Exception:  # noqa: BLE001 - a lost actor has nothing left to close
            pass
        self._kill_actors()

    def _kill_actors(self) -> None:
        """Kill every actor (asked to close first by `close`; not at a failed start, where some
        never started), then the Ray this object started, if it did."""
        for s in self._slots:
            self._ray.kill(s.handle)
        if self._owns_ray:
            self._ray.shutdown()

    def __enter__(self) -> RaySandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _lost_result(
    job: Job, attempts: int, message: str, cause: SandboxErrorCause
) -> ExecutionResult:
    return ExecutionResult(
        Verdict.SANDBOX_ERROR,
        n_tests=len(job.tests),
        message=message,
        attempts=attempts,
        sandbox_error_cause=cause,
    )
