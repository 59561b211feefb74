"""`POST /v1/verify` of `execrl sandbox serve`: a program graded by a domain verifier
(docs/verifiers.md), answered with the verifier's score, components, verdict, feedback and the
artifacts it kept.

    {"code": "SELECT ...", "verifier": "sql", "spec": {...}}        a task of the client's own
    {"code": "SELECT ...", "task": {"benchmark": "sql", "id": "sql/train/1/0"}}

The verifier's runs go through the server's queue like any other run (a full queue is 503), and
the comparison runs here, in the server, on what they gave back: expected results sent in
`spec` never enter the sandbox. `/v1/run` and `/v1/run_batch` with a `task` graded by a verifier
are verified the same way (`run_graded`), and answered with the verification added.

Only the built-in verifiers are served. A verifier is code the server imports and runs in its
own trusted process; `"package.module:Class"` from a request would let any client make the
server import any module on its path, so a request naming one is refused (422).
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from fastapi import HTTPException
from pydantic import BaseModel, ConfigDict

from execrl.sandbox.first_failure import run_stopping
from execrl.sandbox.grading.custom_checker import run_checked
from execrl.sandbox.grading.job import Job
from execrl.sandbox.grading.verdict import ExecutionResult
from execrl.sandbox.runner import CHECKER, FIRST_FAILURE, route
from execrl.sandbox.service import wire
from execrl.sandbox.service.server_config import ServerConfig
from execrl.sandbox.service.server_jobs import (
    TaskRef,
    _check_limits,
    _check_size,
    _find_task,
    check_text,
)
from execrl.sandbox.verifiers import BUILTIN, Verifier, VerifyRequest, load_verifier
from execrl.sandbox.verifiers.base import VerifierSpecError, verification_of
from execrl.sandbox.verifiers.run import verified_result
from execrl.tasks.schema import VerifierTests

Execute = Callable[[Sequence[Job]], Awaitable[list[ExecutionResult]]]


class VerifyRun(BaseModel):
    model_config = ConfigDict(extra="forbid")
    code: str
    verifier: str | None = None  # a built-in verifier's name, with `spec`
    spec: dict[str, Any] | None = None  # the task's data for it, as in a task file
    task: TaskRef | None = None  # or a task of a suite the server knows (sql, verilog, ...)
    limits: dict[str, Any] = {}
    id: str = ""


@dataclass(frozen=True, slots=True)
class Planned:
    """One verification to run: the verifier, what it judges, and the runs it asked for."""

    verifier: Verifier
    request: VerifyRequest
    jobs: tuple[Job, ...]


def plan_verify(
    req: VerifyRun, config: ServerConfig, tasks_cache: dict[str, dict[str, Any]]
) -> Planned:
    """The runs a /v1/verify request needs; every fault of the request is a 4xx naming it."""
    check_text(req)
    _check_size("code", req.code, config.max_code_bytes)
    inline = req.verifier is not None or req.spec is not None
    if inline == (req.task is not None):
        raise HTTPException(
            422, "give either `verifier` and `spec` (a task of your own) or `task`, not both"
        )
    if req.task is not None:
        task = _find_task(req.task, tasks_cache)
        if not isinstance(task.tests, VerifierTests):
            raise HTTPException(
                422, f"task.id: {task.id} is graded by unit tests, not a verifier; use /v1/run"
            )
        tests, task_id = task.tests, req.id or task.id
    else:
        if req.verifier not in BUILTIN:
            raise HTTPException(
                422,
                f"verifier: {req.verifier!r} is not served; this server runs its built-in "
                f"verifiers only ({', '.join(BUILTIN)})",
            )
        if req.spec is None:
            raise HTTPException(422, f"spec: the {req.verifier} verifier needs the task's data")
        tests, task_id = VerifierTests(req.verifier, req.spec), req.id
    try:
        limits = wire.limits_from_json(dict(req.limits))
    except (ValueError, TypeError) as exc:
        raise HTTPException(422, str(exc)) from None
    _check_limits(limits, config)
    return plan(VerifyRequest(task_id, req.code, tests, limits))


def plan(request: VerifyRequest) -> Planned:
    """The verifier a request names (built-in: checked before) and the runs it asks for."""
    try:
        verifier = load_verifier(request.tests.verifier)
        jobs = tuple(verifier.jobs(request))
    except VerifierSpecError as exc:
        raise HTTPException(422, f"spec: {exc}") from None
    return Planned(verifier, request, jobs)


def planned_from_job(job: Job) -> Planned:
    """A /v1/run job whose task is graded by a verifier (its tests are `VerifierTests`)."""
    assert isinstance(job.tests, VerifierTests)
    return plan(VerifyRequest(job.id, job.program, job.tests, job.limits))


async def run_planned(planned: Planned, execute: Execute) -> ExecutionResult:
    """Its runs through the server's queue, then the verifier's judgement."""
    return await judge(planned, await execute(planned.jobs))


async def run_graded(
    jobs: Sequence[Job], execute: Execute, workers: int = 1
) -> list[ExecutionResult]:
    """`execute(jobs)` for /v1/run and /v1/run_batch, each job routed as the runner routes it
    (`runner.py`): a job whose task is graded by a verifier is replaced by the runs its verifier
    asks for (one submission for all) and judged here; one whose outputs a checker program
    judges goes to `custom_checker.run_checked`, and one that stops at its first failing case
    to `first_failure.run_stopping` (its windows split among `workers`), whose runs go through
    the same queue; order preserved."""
    routes = [route(job) for job in jobs]
    off_loop = {
        name: [i for i, r in enumerate(routes) if r == name] for name in (CHECKER, FIRST_FAILURE)
    }
    rest = [i for i, r in enumerate(routes) if r not in off_loop]
    loop = asyncio.get_running_loop()

    def run(batch: Sequence[Job]) -> list[ExecutionResult]:  # from a route's thread
        return asyncio.run_coroutine_threadsafe(execute(batch), loop).result()

    def checked(batch: list[Job]) -> list[ExecutionResult]:
        return run_checked(run, batch)

    def stopping(batch: list[Job]) -> list[ExecutionResult]:
        return run_stopping(run, batch, workers)

    async def in_thread(how: Callable[[list[Job]], list[ExecutionResult]],
                        idx: list[int]) -> list[ExecutionResult]:  # fmt: skip
        return await asyncio.to_thread(how, [jobs[i] for i in idx]) if idx else []

    graded, by_checker, by_windows = await asyncio.gather(
        _verified_or_run([jobs[i] for i in rest], execute),
        in_thread(checked, off_loop[CHECKER]),
        in_thread(stopping, off_loop[FIRST_FAILURE]),
    )
    results: list[ExecutionResult | None] = [None] * len(jobs)
    for idx, ran in ((rest, graded), (off_loop[CHECKER], by_checker),
                     (off_loop[FIRST_FAILURE], by_windows)):  # fmt: skip
        for i, r in zip(idx, ran, strict=True):
            results[i] = r
    return [r for r in results if r is not None]


async def _verified_or_run(jobs: Sequence[Job], execute: Execute) -> list[ExecutionResult]:
    """The jobs' results, a verifier's jobs judged here on the runs it asked for."""
    if not jobs:
        return []
    plans = {
        i: planned_from_job(j) for i, j in enumerate(jobs) if isinstance(j.tests, VerifierTests)
    }
    runs: list[Job] = []
    spans = []  # (start, end) in `runs` of each job's runs
    for i, job in enumerate(jobs):
        own = plans[i].jobs if i in plans else (job,)
        spans.append((len(runs), len(runs) + len(own)))
        runs.extend(own)
    ran = await execute(runs)
    return [
        await judge(plans[i], ran[start:end]) if i in plans else ran[start]
        for i, (start, end) in enumerate(spans)
    ]


async def judge(planned: Planned, runs: Sequence[ExecutionResult]) -> ExecutionResult:
    """The verifier's judgement of its runs, in this process (off the event loop: a verifier
    may decode images)."""
    try:
        return await asyncio.to_thread(verified_result, planned.verifier, planned.request, runs)
    except VerifierSpecError as exc:  # the task's own data failed (a reference chart that fails)
        raise HTTPException(422, f"spec: {exc}") from None


def result_json(result: ExecutionResult) -> dict[str, Any]:
    """A graded run's answer: with the verification where a verifier judged it, else exactly
    `wire.result_to_json`."""
    if verification_of(result) is None:
        return wire.result_to_json(result)
    return verification_to_json(result)


def verification_to_json(result: ExecutionResult) -> dict[str, Any]:
    """`wire.result_to_json` plus the verification: score, components, verdict, feedback and
    the artifacts (base64), or null for a run the verifier never judged (a sandbox error)."""
    found = verification_of(result)
    rest = {k: v for k, v in result.extra.items() if k != "verification"}  # not JSON as it is
    out = wire.result_to_json(replace(result, extra=rest))
    out["verification"] = None
    if found is not None:
        out["verification"] = {
            "score": found.score,
            "components": dict(found.components),
            "verdict": found.verdict.value,
            "feedback": found.feedback,
            "artifacts": [
                {"path": a.path, "kind": a.kind, "data": base64.b64encode(a.data).decode()}
                for a in found.artifacts
            ],
        }
    return out
