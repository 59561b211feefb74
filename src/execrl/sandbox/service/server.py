"""`execrl sandbox serve`: the sandbox over HTTP (FastAPI on uvicorn).

Endpoints:
- `POST /run_code`: SandboxFusion's request and response models (`code`, `language`, `stdin`,
  `run_timeout`, `compile_timeout`, `memory_limit_MB`, `files`, `fetch_files` in; `status`,
  `message`, `compile_result`, `run_result` out), so SandboxFusion's client and verl's
  sandbox-fusion reward path work unchanged. Runs go through the same sandbox as graded runs.
- `POST /v1/run` and `POST /v1/run_batch`: graded runs (inline tests or a benchmark task, plus
  the candidate's code), answered with verdicts and per-test detail (`wire.result_to_json`);
  a task graded by a domain verifier also with the verification (`server_verifiers`).
- `POST /v1/verify`: a program graded by a built-in verifier (`server_verifiers`): its score,
  components, verdict, feedback and artifacts.
- `GET /health`, `GET /metrics` (Prometheus text).

A full queue answers 503 with Retry-After, never a backlog; bodies over `max_body_bytes` answer
413; malformed or out-of-range input answers 400/413/422 with the field named, never 500 (JSON
nested too deep, a number past 4,300 digits, a lone surrogate, a value the wire decoder cannot
read). With a token, every endpoint needs `Authorization: Bearer TOKEN`, but /health, which
without it says only that the server is up (worker pids, uids and layers are the token's).
Responses are ASCII JSON: text a program chose (an exception message with a lone surrogate)
cannot make rendering the answer fail. SIGINT/SIGTERM stop accepting,
finish the runs in flight, then stop the workers; no process of the sandbox outlives the server.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hmac
import json
import math
import sys
import time
from collections.abc import Sequence
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from execrl.sandbox.grading import languages
from execrl.sandbox.grading.job import Job
from execrl.sandbox.grading.verdict import ExecutionResult, Verdict
from execrl.sandbox.service import server_verifiers
from execrl.sandbox.service.dispatch import Backend, Closed, QueueFull
from execrl.sandbox.service.server_jobs import (
    Batch,
    GradedRun,
    RunCodeRequest,
    ServerConfig,
    graded_job,
    run_code_job,
    run_code_response,
)
from execrl.sandbox.service.server_tasks import TaskSets

# -- metrics -------------------------------------------------------------------------------

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class Metrics:
    """Counters for /metrics, updated on the event loop only (no lock needed)."""

    def __init__(self) -> None:
        self.executions = 0
        self.verdicts = {v.value: 0 for v in Verdict}
        self.buckets = [0] * len(BUCKETS)
        self.latency_sum = 0.0
        self.rejected: dict[str, int] = {}
        self.requests: dict[tuple[str, int], int] = {}

    def observe(self, seconds: float) -> None:
        """One run executed, `seconds` from admission to its result."""
        self.executions += 1
        self.latency_sum += seconds
        for i, le in enumerate(BUCKETS):
            if seconds <= le:
                self.buckets[i] += 1

    def answered(self, verdict: Verdict) -> None:
        """One program judged, by the verdict its client was told (see `Endpoints.answer`)."""
        self.verdicts[verdict.value] += 1

    def reject(self, reason: str) -> None:
        self.rejected[reason] = self.rejected.get(reason, 0) + 1

    def render(self, backend: Backend) -> str:
        d = backend.describe()
        out = [
            "# HELP execrl_executions_total Runs executed and graded.",
            "# TYPE execrl_executions_total counter",
            f"execrl_executions_total {self.executions}",
            "# HELP execrl_verdicts_total Programs judged, by the verdict the client was told "
            "(a verifier's runs count once, as its verdict; /run_code: PASSED when it exited 0).",
            "# TYPE execrl_verdicts_total counter",
            *(f'execrl_verdicts_total{{verdict="{v}"}} {n}' for v, n in self.verdicts.items()),
            "# HELP execrl_run_latency_seconds Time from admission to verdict, per run.",
            "# TYPE execrl_run_latency_seconds histogram",
            *(
                f'execrl_run_latency_seconds_bucket{{le="{le:g}"}} {n}'
                for le, n in zip(BUCKETS, self.buckets, strict=True)
            ),
            f'execrl_run_latency_seconds_bucket{{le="+Inf"}} {self.executions}',
            f"execrl_run_latency_seconds_sum {self.latency_sum:.6f}",
            f"execrl_run_latency_seconds_count {self.executions}",
            "# HELP execrl_queue_depth Runs waiting for a worker.",
            "# TYPE execrl_queue_depth gauge",
            f"execrl_queue_depth {backend.queue_depth()}",
            "# HELP execrl_active_workers Workers running a program now.",
            "# TYPE execrl_active_workers gauge",
            f"execrl_active_workers {backend.in_flight()}",
            "# HELP execrl_workers Fork-server workers in the pool.",
            "# TYPE execrl_workers gauge",
            f"execrl_workers {d.get('workers', 0)}",
            "# HELP execrl_worker_restarts_total Workers replaced after dying.",
            "# TYPE execrl_worker_restarts_total counter",
            f"execrl_worker_restarts_total {d.get('worker_restarts', 0)}",
            "# HELP execrl_rejected_total Requests refused, by reason.",
            "# TYPE execrl_rejected_total counter",
            *(f'execrl_rejected_total{{reason="{r}"}} {n}' for r, n in self.rejected.items()),
            "# HELP execrl_http_requests_total HTTP requests by path and status.",
            "# TYPE execrl_http_requests_total counter",
            *(
                f'execrl_http_requests_total{{path="{p}",code="{c}"}} {n}'
                for (p, c), n in sorted(self.requests.items())
            ),
        ]
        return "\n".join(out) + "\n"


# -- the app -------------------------------------------------------------------------------


class _BodyLimit:
    """ASGI middleware: refuse bodies over the limit (413) before they are buffered."""

    def __init__(self, app: Any, limit: int, metrics: Metrics) -> None:
        self.app, self.limit, self.metrics = app, limit, metrics

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        for name, value in scope.get("headers", ()):
            if name == b"content-length" and value.isdigit() and int(value) > self.limit:
                return await self._refuse(send)
        seen = 0

        async def limited() -> dict:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise _TooLarge
            return message

        path = scope.get("path", "")
        started = False

        async def counted(message: dict) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                key = (path if path in _PATHS else "other", message["status"])
                self.metrics.requests[key] = self.metrics.requests.get(key, 0) + 1
            await send(message)

        try:
            await self.app(scope, limited, counted)
        except _TooLarge:
            if not started:
                await self._refuse(send)

    async def _refuse(self, send: Any) -> None:
        self.metrics.reject("too_large")
        body = f'{{"detail":"request body over the {self.limit}-byte limit"}}'.encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body})


class _TooLarge(Exception):
    pass


_PATHS = frozenset({"/run_code", "/v1/run", "/v1/run_batch", "/v1/verify", "/health", "/metrics"})


class AsciiJSONResponse(JSONResponse):
    """JSON with every non-ASCII character escaped. Text a program chose reaches responses (its
    exception message, say) and JSON can carry a lone surrogate only as an escape: UTF-8, which
    Starlette's JSONResponse encodes to, cannot, and rendering the answer failed with a 500."""

    def render(self, content: Any) -> bytes:
        return json.dumps(
            content, ensure_ascii=True, allow_nan=False, separators=(",", ":")
        ).encode()


def _parse_failure(exc: StarletteHTTPException) -> str:
    """What FastAPI's "There was an error parsing the body" (400) was, for the client."""
    cause = exc.__cause__
    if isinstance(cause, RecursionError):
        return "the body is JSON nested too deeply to read"
    if isinstance(cause, ValueError) and "digits" in str(cause):
        return f"the body holds a number this server cannot read: {cause}"
    return str(exc.detail)


def create_app(backend: Backend, config: ServerConfig) -> Any:
    """The ASGI app over `backend` (FastAPI behind a body-size guard); closing the backend is
    the caller's (see `serve`)."""
    metrics = Metrics()
    app = FastAPI(  # no /docs or /openapi.json: every endpoint but /health is the token's
        title="execrl sandbox",
        version="1",
        default_response_class=AsciiJSONResponse,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.backend, app.state.metrics, app.state.config = backend, metrics, config
    e = Endpoints(backend, config, metrics)
    app.exception_handler(RequestValidationError)(e.invalid)
    app.exception_handler(StarletteHTTPException)(e.refused)
    app.get("/health")(e.health)
    app.get("/metrics", dependencies=[Depends(e.auth)])(e.metrics_text)
    app.post("/run_code", dependencies=[Depends(e.auth)])(e.run_code)
    app.post("/v1/run", dependencies=[Depends(e.auth)])(e.run)
    app.post("/v1/run_batch", dependencies=[Depends(e.auth)])(e.run_batch)
    app.post("/v1/verify", dependencies=[Depends(e.auth)])(e.verify)
    return _BodyLimit(app, config.max_body_bytes, metrics)


class Endpoints:
    """The routes of `create_app` and what they share: the backend, the metrics, the token."""

    def __init__(self, backend: Backend, config: ServerConfig, metrics: Metrics) -> None:
        self.backend, self.config, self.metrics = backend, config, metrics
        self.workers = config.sandbox.workers  # a first-failure window is split among them
        self.task_sets = TaskSets(config)  # what a request's `task` names, loaded off the loop
        self.available = [s.name for s in languages.probe_languages() if s.available]  # forks

    async def invalid(self, request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        self.metrics.reject("invalid")
        if any(e.get("type") == "json_invalid" for e in errors):
            return AsciiJSONResponse({"detail": "the body is not valid JSON"}, status_code=400)
        lines = [
            (".".join(str(p) for p in e.get("loc", ()) if p != "body") or "body")
            + f": {e.get('msg')}"
            for e in errors[:20]
        ]
        more = f"; and {len(errors) - 20} more" if len(errors) > 20 else ""
        return AsciiJSONResponse({"detail": "; ".join(lines) + more}, status_code=422)

    async def refused(self, request: Request, exc: StarletteHTTPException) -> JSONResponse:
        detail = _parse_failure(exc) if exc.status_code == 400 else exc.detail
        return AsciiJSONResponse({"detail": detail}, exc.status_code, headers=exc.headers)

    def has_token(self, request: Request) -> bool:
        if self.config.token is None:
            return True
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(
            given.encode(), self.config.token.encode()
        )

    def auth(self, request: Request) -> None:
        if not self.has_token(request):
            self.metrics.reject("unauthorized")
            raise HTTPException(
                401, "missing or wrong bearer token", headers={"WWW-Authenticate": "Bearer"}
            )

    async def execute(self, jobs: Sequence[Job]) -> list[ExecutionResult]:
        t0 = time.monotonic()
        try:
            futures = self.backend.submit_many(jobs)
        except QueueFull as exc:
            self.metrics.reject("queue_full")
            raise HTTPException(
                503, str(exc), headers={"Retry-After": str(self.config.retry_after_s)}
            ) from None
        except Closed as exc:
            self.metrics.reject("shutting_down")
            raise HTTPException(503, str(exc), headers={"Retry-After": "5"}) from None
        waiting = [asyncio.wrap_future(f) for f in futures]
        results: list[ExecutionResult] = []
        for w in waiting:
            results.append(await w)
            self.metrics.observe(time.monotonic() - t0)
        return results

    def answer(self, results: Sequence[ExecutionResult]) -> Sequence[ExecutionResult]:
        """Every endpoint's judged results pass here, once each, on their way to the client:
        the one place verdicts are counted (not the raw runs a verifier or /run_code makes)."""
        for result in results:
            self.metrics.answered(result.verdict)
        return results

    async def health(self, request: Request) -> dict[str, Any]:
        if not self.has_token(request):  # a probe learns the server is up, not its workers
            return {"status": "ok"}
        return {
            "status": "ok",
            "queue_depth": self.backend.queue_depth(),
            "in_flight": self.backend.in_flight(),
            "languages": self.available,
            **self.backend.describe(),
        }

    async def metrics_text(self) -> PlainTextResponse:
        return PlainTextResponse(
            self.metrics.render(self.backend), media_type="text/plain; version=0.0.4; charset=utf-8"
        )

    async def run_code(self, req: RunCodeRequest) -> JSONResponse:
        job = await asyncio.to_thread(_request_job, run_code_job, req, self.config)
        (result,) = await self.execute([job])
        response = run_code_response(result, job)
        # No expected output: a run that finished with exit status 0 passed, whatever it printed
        ran = Verdict.PASSED if response["status"] == "Success" else result.verdict
        self.answer([dataclasses.replace(result, verdict=ran)])
        return AsciiJSONResponse(response)

    async def run(self, req: GradedRun) -> JSONResponse:
        loaded = await self.task_sets.for_request([req.task.benchmark] if req.task else [])
        job = await asyncio.to_thread(_request_job, graded_job, req, self.config, loaded)
        (result,) = self.answer(
            await server_verifiers.run_graded([job], self.execute, self.workers)
        )
        return AsciiJSONResponse(server_verifiers.result_json(result))

    async def run_batch(self, req: Batch) -> JSONResponse:
        if len(req.runs) > self.config.max_batch:
            raise HTTPException(413, f"{len(req.runs)} runs; the limit is {self.config.max_batch}")
        if not req.runs:
            raise HTTPException(422, "runs: the batch is empty")
        loaded = await self.task_sets.for_request(r.task.benchmark for r in req.runs if r.task)
        jobs = []
        for n, r in enumerate(req.runs):
            try:
                jobs.append(
                    await asyncio.to_thread(_request_job, graded_job, r, self.config, loaded)
                )
            except HTTPException as exc:
                raise HTTPException(exc.status_code, f"runs.{n}: {exc.detail}") from None
        results = self.answer(await server_verifiers.run_graded(jobs, self.execute, self.workers))
        return AsciiJSONResponse({"results": [server_verifiers.result_json(r) for r in results]})

    async def verify(self, req: server_verifiers.VerifyRun) -> JSONResponse:
        loaded = await self.task_sets.for_request([req.task.benchmark] if req.task else [])
        planned = await asyncio.to_thread(
            _request_job, server_verifiers.plan_verify, req, self.config, loaded
        )
        (result,) = self.answer([await server_verifiers.run_planned(planned, self.execute)])
        return AsciiJSONResponse(server_verifiers.verification_to_json(result))


def _request_job(build: Any, *args: Any) -> Job:
    """`build(*args)`, a job made from the request alone: anything it raises but an HTTPException
    is the request's fault (a value no check foresaw), so a 422 that names it, never a 500.
    Called in a thread: decoding a large request's tests takes seconds (12 MB of call tests:
    3.9 s at load 8), which in the event loop would leave /health and every request waiting."""
    try:
        return build(*args)
    except HTTPException:
        raise
    except Exception as exc:  # noqa: BLE001 - see the docstring
        raise HTTPException(
            422, f"the request cannot be run: {type(exc).__name__}: {exc}"
        ) from None


# -- serving -------------------------------------------------------------------------------


def make_backend(config: ServerConfig) -> Backend:
    """The transport `config.sandbox` names, as `execrl train` and `execrl eval` open it; Ray
    actors queue the runs themselves, the local pool behind a dispatcher that does."""
    from execrl.sandbox.service.backend import open_transport

    if config.sandbox.backend == "ray":
        return open_transport(config.sandbox, max_queue=config.max_queue)
    from execrl.sandbox.service.dispatch import Dispatcher

    return Dispatcher(open_transport(config.sandbox), max_queue=config.max_queue)


def serve(config: ServerConfig) -> int:
    """Run until SIGINT or SIGTERM; then finish in-flight runs and stop every worker."""
    import signal
    import socket

    import uvicorn

    backend = make_backend(config)
    try:
        sock = socket.socket(socket.AF_INET6 if ":" in config.host else socket.AF_INET)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((config.host, config.port))
        sock.listen(2048)
        host, port = sock.getsockname()[:2]
        app = create_app(backend, config)
        uv = uvicorn.Config(
            app,
            log_level="warning",
            timeout_graceful_shutdown=math.ceil(config.graceful_timeout_s),
            lifespan="off",
        )
        server = uvicorn.Server(uv)
        # uvicorn re-raises the stopping signal once it has shut down, under the handlers found
        # at start: these make that a no-op, so that the workers are stopped below.
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: None)
        print(
            f"execrl sandbox serve: listening on http://{host}:{port}", file=sys.stderr, flush=True
        )
        server.run(sockets=[sock])
    finally:
        backend.close()
        print("execrl sandbox serve: stopped", file=sys.stderr, flush=True)
    return 0
