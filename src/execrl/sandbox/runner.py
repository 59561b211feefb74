"""The runner above the pool: each job of a batch goes to the way its tests are judged.

    harness        the job as it is: its units on a worker, graded in the parent (`grade.py`)
    checker        a checker program judges each case's output (`grading/custom_checker.py`)
    verifier       a domain verifier asks for runs and scores them (`verifiers/run.py`)
    first_failure  a pass/fail job's cases in growing windows, none after a failure
                   (`first_failure.py`)

The route is each job's own (`route`), never the batch's: a batch that mixes them runs each
route's jobs side by side on the one pool, and the results come back in the batch's order. Every
strategy runs its jobs through the transport below it (`pool.WorkerPool`, or Ray's actors), never
through the runner again, so no run loops back up; and a strategy's failure on one job is that
job's verdict (a verifier that breaks on a program's output fails that program), never the
batch's. Only a task file that is wrong before anything ran (a verifier it names that does not
exist) is raised, naming the task: that is the user's error to fix.

`Sandbox` is what every layer above opens: a runner over a local pool of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from execrl.sandbox.config import SandboxConfig
from execrl.sandbox.first_failure import run_stopping, stops_early
from execrl.sandbox.grading.custom_checker import needs_checker, run_checked
from execrl.sandbox.grading.job import Job
from execrl.sandbox.grading.verdict import ExecutionResult
from execrl.sandbox.pool import WorkerPool
from execrl.sandbox.verifiers.run import run_verified

HARNESS, CHECKER, VERIFIER, FIRST_FAILURE = "harness", "checker", "verifier", "first_failure"
ROUTES = (HARNESS, CHECKER, VERIFIER, FIRST_FAILURE)
Progress = Callable[[int], None] | None


class Transport(Protocol):
    """What the runner needs below it: plain jobs run, results in order (`WorkerPool`,
    `ray_backend.RaySandbox`)."""

    def run_many(self, jobs: Sequence[Job]) -> list[ExecutionResult]: ...
    def close(self) -> None: ...


def route(job: Job) -> str:
    """How `job` is judged, from its tests and options alone."""
    if job.tests.kind == "verifier":
        return VERIFIER
    if needs_checker(job):
        return CHECKER
    if stops_early(job):
        return FIRST_FAILURE
    return HARNESS


class JobRunner:
    """Routes each job to the harness, a checker or a verifier over `transport`, which it owns
    (closes). `workers`: the runs the transport takes at once (a window of cases is split
    among them)."""

    def __init__(self, transport: Transport, workers: int) -> None:
        self.transport: Any = transport  # its run_many may take `progress` (the pool's does)
        self.workers = workers

    def run(self, job: Job) -> ExecutionResult:
        return self.run_many([job])[0]

    def run_many(self, jobs: Sequence[Job], progress: Progress = None) -> list[ExecutionResult]:
        """Every job's result, in the order of `jobs`; `progress(n)`: n more jobs ended."""
        by_route: dict[str, list[int]] = {}
        for i, job in enumerate(jobs):
            by_route.setdefault(route(job), []).append(i)
        if len(by_route) <= 1:  # one route: no thread
            ran = [
                self._run_route(r, [jobs[i] for i in idx], progress) for r, idx in by_route.items()
            ]
        else:  # the routes side by side: the pool's workers are shared safely
            with ThreadPoolExecutor(len(by_route), thread_name_prefix="execrl-route") as threads:
                futures = [
                    threads.submit(self._run_route, r, [jobs[i] for i in idx], progress)
                    for r, idx in by_route.items()
                ]
                ran = [f.result() for f in futures]
        results: list[ExecutionResult | None] = [None] * len(jobs)
        for idx, results_of_route in zip(by_route.values(), ran, strict=True):
            for i, result in zip(idx, results_of_route, strict=True):
                results[i] = result
        return [r for r in results if r is not None]

    def _run_route(self, name: str, jobs: list[Job], progress: Progress) -> list[ExecutionResult]:
        if name == VERIFIER:
            return run_verified(self._plain, jobs, progress)
        if name == CHECKER:
            return run_checked(self._plain, jobs, progress)
        if name == FIRST_FAILURE:
            return run_stopping(self._plain, jobs, self.workers, progress)
        return self._plain(jobs, progress)

    def _plain(self, jobs: Sequence[Job], progress: Progress = None) -> list[ExecutionResult]:
        """The transport's runs; a transport that counts none (Ray, the server's client) is
        told of no progress."""
        if progress is None:
            return self.transport.run_many(jobs)
        return self.transport.run_many(jobs, progress=progress)

    def close(self) -> None:
        self.transport.close()

    def __enter__(self) -> JobRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Sandbox(JobRunner):
    """Runs untrusted programs against tests: the runner over a local pool of its own (the
    pool's settings and each run's default limits in `config`). Use as a context manager;
    raises `SandboxUnavailable` if the isolation asked for is missing."""

    def __init__(self, config: SandboxConfig | None = None, **overrides: Any) -> None:
        self.pool = WorkerPool(config, **overrides)
        super().__init__(self.pool, self.pool.config.workers)
        self.config = self.pool.config
        self.layers = self.pool.layers
        self.stats = self.pool.stats
        self.memory_mode, self.memory_detail = self.pool.memory_mode, self.pool.memory_detail

    def worker_pids(self) -> list[int]:
        return self.pool.worker_pids()

    def worker_uids(self) -> list[int]:
        """The uids programs run under (empty without the uid layer)."""
        return self.pool.worker_uids()

    def __enter__(self) -> Sandbox:
        return self


def run_jobs(jobs: Iterable[Job], workers: int = 2, **config: Any) -> list[ExecutionResult]:
    """One-shot convenience: start a sandbox, run, close."""
    with Sandbox(workers=workers, **config) as sb:
        return sb.run_many(list(jobs))
