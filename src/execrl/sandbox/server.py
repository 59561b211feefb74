"""`execrl sandbox serve`: the sandbox over HTTP (FastAPI on uvicorn).

Endpoints:
- `POST /run_code`: SandboxFusion's request and response models (`code`, `language`, `stdin`,
  `run_timeout`, `compile_timeout`, `memory_limit_MB`, `files`, `fetch_files` in; `status`,
  `message`, `compile_result`, `run_result` out), so SandboxFusion's client and verl's
  sandbox-fusion reward path work unchanged. Runs go through the same sandbox as graded runs.
- `POST /v1/run` and `POST /v1/run_batch`: graded runs (inline tests or a benchmark task, plus
  the candidate's code), answered with verdicts and per-test detail (`wire.result_to_json`).
- `GET /health`, `GET /metrics` (Prometheus text).

A full queue answers 503 with Retry-After, never a backlog; bodies over `max_body_bytes` answer
413; malformed or out-of-range input answers 400/413/422 with the field named. With a token,
every endpoint but /health needs `Authorization: Bearer TOKEN`. SIGINT/SIGTERM stop accepting,
finish the runs in flight, then stop the workers; no process of the sandbox outlives the server.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import BaseModel, ConfigDict

from execrl.sandbox import languages, wire
from execrl.sandbox.dispatch import Backend, Closed, QueueFull
from execrl.sandbox.job import Job
from execrl.sandbox.limits import Limits
from execrl.sandbox.verdict import ExecutionResult, Verdict
from execrl.tasks.schema import Compare, StdioCase, StdioTests


@dataclass(frozen=True, slots=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8080  # 0: any free port (printed on stderr)
    workers: int = 2  # fork-server workers (per Ray actor with --ray)
    max_queue: int = 256  # runs waiting for a worker; beyond it 503 + Retry-After
    max_batch: int = 256  # runs in one /v1/run_batch request
    max_body_bytes: int = 16 << 20  # request body
    max_code_bytes: int = 1 << 20  # one program
    max_stdin_bytes: int = 8 << 20  # stdin of one run (or one test case)
    max_files_bytes: int = 16 << 20  # decoded `files` of one run
    max_timeout_s: float = 120.0  # largest run or compile timeout a request may ask for
    max_memory_mb: int = 8192
    retry_after_s: int = 1
    token: str | None = None  # bearer token; None: no authentication
    max_retries: int = 2  # extra attempts for a run that ended in SANDBOX_ERROR
    allow_weaker_sandbox: bool = False
    ray_address: str | None = None  # run on a Ray cluster instead of local workers
    ray_actors: int = 2
    graceful_timeout_s: float = 30.0  # time given to requests in flight at shutdown


# -- request models ------------------------------------------------------------------------


class RunCodeRequest(BaseModel):
    """SandboxFusion's RunCodeRequest (sandbox/server/sandbox_api.py), plus what verl sends."""

    model_config = ConfigDict(extra="ignore")
    code: str
    language: str
    stdin: str | None = None
    run_timeout: float = 10
    compile_timeout: float = 10
    memory_limit_MB: int = -1
    files: dict[str, str | None] = {}
    fetch_files: list[str] = []


class TestsIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["assert", "call", "stdio"]
    setup: str = ""
    statements: list[str] = []
    inputs: list[list[Any]] = []
    expected: list[Any] = []
    cases: list[dict[str, str]] = []
    compare: dict[str, Any] = {}


class TaskRef(BaseModel):
    model_config = ConfigDict(extra="forbid")
    benchmark: str
    id: str


class GradedRun(BaseModel):
    model_config = ConfigDict(extra="forbid")
    code: str
    language: str = "python"
    entry_point: str | None = None
    tests: TestsIn | None = None
    task: TaskRef | None = None
    limits: dict[str, Any] = {}
    strict_returns: bool = True
    allow_threads: bool = False
    id: str = ""
    files: dict[str, str] = {}
    fetch_files: list[str] = []


class Batch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    runs: list[GradedRun]


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

    def observe(self, result: ExecutionResult, seconds: float) -> None:
        self.executions += 1
        self.verdicts[result.verdict.value] += 1
        self.latency_sum += seconds
        for i, le in enumerate(BUCKETS):
            if seconds <= le:
                self.buckets[i] += 1

    def reject(self, reason: str) -> None:
        self.rejected[reason] = self.rejected.get(reason, 0) + 1

    def render(self, backend: Backend) -> str:
        d = backend.describe()
        out = [
            "# HELP execrl_executions_total Runs executed and graded.",
            "# TYPE execrl_executions_total counter",
            f"execrl_executions_total {self.executions}",
            "# HELP execrl_verdicts_total Runs by verdict.",
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

        try:
            await self.app(scope, limited, send)
        except _TooLarge:
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


def create_app(backend: Backend, config: ServerConfig) -> FastAPI:
    """The ASGI app over `backend`; closing the backend is the caller's (see `serve`)."""
    metrics = Metrics()
    app = FastAPI(title="execrl sandbox", version="1")
    app.state.backend, app.state.metrics, app.state.config = backend, metrics, config
    tasks_cache: dict[str, dict[str, Any]] = {}

    @app.middleware("http")
    async def count(request: Request, call_next: Any) -> Any:
        response = await call_next(request)
        key = (request.url.path, response.status_code)
        metrics.requests[key] = metrics.requests.get(key, 0) + 1
        return response

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        if any(e.get("type") == "json_invalid" for e in errors):
            metrics.reject("invalid")
            return JSONResponse({"detail": "the body is not valid JSON"}, status_code=400)
        lines = [
            (".".join(str(p) for p in e.get("loc", ()) if p != "body") or "body")
            + f": {e.get('msg')}"
            for e in errors
        ]
        metrics.reject("invalid")
        return JSONResponse({"detail": "; ".join(lines)}, status_code=422)

    def auth(request: Request) -> None:
        if config.token is None:
            return
        header = request.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            given.encode(), config.token.encode()
        ):
            metrics.reject("unauthorized")
            raise HTTPException(
                401, "missing or wrong bearer token", headers={"WWW-Authenticate": "Bearer"}
            )

    async def execute(jobs: Sequence[Job]) -> list[ExecutionResult]:
        t0 = time.monotonic()
        try:
            futures = backend.submit_many(jobs)
        except QueueFull as exc:
            metrics.reject("queue_full")
            raise HTTPException(
                503, str(exc), headers={"Retry-After": str(config.retry_after_s)}
            ) from None
        except Closed as exc:
            metrics.reject("shutting_down")
            raise HTTPException(503, str(exc), headers={"Retry-After": "5"}) from None
        waiting = [asyncio.wrap_future(f) for f in futures]
        results: list[ExecutionResult] = []
        for w in waiting:
            results.append(await w)
            metrics.observe(results[-1], time.monotonic() - t0)
        return results

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {
            "status": "ok",
            "queue_depth": backend.queue_depth(),
            "in_flight": backend.in_flight(),
            "languages": [s.name for s in languages.probe_languages() if s.available],
            **backend.describe(),
        }

    @app.get("/metrics", dependencies=[Depends(auth)])
    async def metrics_text() -> PlainTextResponse:
        return PlainTextResponse(
            metrics.render(backend), media_type="text/plain; version=0.0.4; charset=utf-8"
        )

    @app.post("/run_code", dependencies=[Depends(auth)])
    async def run_code(req: RunCodeRequest) -> dict[str, Any]:
        job = _run_code_job(req, config)
        (result,) = await execute([job])
        return run_code_response(result, job)

    @app.post("/v1/run", dependencies=[Depends(auth)])
    async def run(req: GradedRun) -> dict[str, Any]:
        job = _graded_job(req, config, tasks_cache)
        (result,) = await execute([job])
        return wire.result_to_json(result)

    @app.post("/v1/run_batch", dependencies=[Depends(auth)])
    async def run_batch(req: Batch) -> dict[str, Any]:
        if len(req.runs) > config.max_batch:
            raise HTTPException(413, f"{len(req.runs)} runs; the limit is {config.max_batch}")
        if not req.runs:
            raise HTTPException(422, "runs: the batch is empty")
        jobs = []
        for n, r in enumerate(req.runs):
            try:
                jobs.append(_graded_job(r, config, tasks_cache))
            except HTTPException as exc:
                raise HTTPException(exc.status_code, f"runs.{n}: {exc.detail}") from None
        results = await execute(jobs)
        return {"results": [wire.result_to_json(r) for r in results]}

    wrapped = _BodyLimit(app, config.max_body_bytes, metrics)
    wrapped.state = app.state  # type: ignore[attr-defined]
    return wrapped  # type: ignore[return-value]


# -- requests to jobs ----------------------------------------------------------------------


def _check_timeout(name: str, value: float | None, config: ServerConfig) -> None:
    if value is None:
        return
    if not (isinstance(value, int | float) and 0 < value <= config.max_timeout_s):
        raise HTTPException(
            422, f"{name}: {value!r} must be a number of seconds in (0, {config.max_timeout_s:g}]"
        )


def _check_size(name: str, text: str, limit: int) -> None:
    if len(text) > limit:  # characters; a close enough bound on bytes for a refusal
        raise HTTPException(413, f"{name}: {len(text)} characters, over the {limit} limit")


def _language(name: str) -> str:
    try:
        lang = languages.canonical(name)
    except languages.LanguageUnavailable as exc:
        raise HTTPException(422, f"language: {exc}") from None
    if languages.missing_tools(lang):
        raise HTTPException(
            422,
            f"language: {lang!r} is not available on this server (missing "
            f"{', '.join(languages.missing_tools(lang))}); see `execrl sandbox doctor`",
        )
    return lang


def _decode_files(
    files: dict[str, str | None], config: ServerConfig
) -> tuple[tuple[str, bytes], ...]:
    out, total = [], 0
    for path, data in files.items():
        if data is None:
            continue
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise HTTPException(422, f"files.{path}: not base64") from None
        total += len(raw)
        out.append((path, raw))
    if total > config.max_files_bytes:
        raise HTTPException(413, f"files: {total} bytes, over the {config.max_files_bytes} limit")
    return tuple(out)


def _make_job(**kwargs: Any) -> Job:
    try:
        return Job(**kwargs)
    except (ValueError, TypeError) as exc:
        raise HTTPException(422, str(exc)) from None


def _run_code_job(req: RunCodeRequest, config: ServerConfig) -> Job:
    lang = _language(req.language)
    _check_size("code", req.code, config.max_code_bytes)
    _check_size("stdin", req.stdin or "", config.max_stdin_bytes)
    _check_timeout("run_timeout", req.run_timeout, config)
    _check_timeout("compile_timeout", req.compile_timeout, config)
    memory = Limits().memory_mb
    if req.memory_limit_MB > 0:
        if req.memory_limit_MB > config.max_memory_mb:
            raise HTTPException(422, f"memory_limit_MB: over this server's {config.max_memory_mb}")
        memory = req.memory_limit_MB
    limits = Limits(wall_s=req.run_timeout, compile_wall_s=req.compile_timeout, memory_mb=memory)
    # One case with no expected output: the verdict is not used, the observations are.
    tests = StdioTests((StdioCase(req.stdin or "", ""),), Compare())
    return _make_job(
        program=req.code,
        tests=tests,
        limits=limits,
        language=lang,
        files=_decode_files(req.files, config),
        fetch_files=tuple(req.fetch_files),
    )


def run_code_response(r: ExecutionResult, job: Job) -> dict[str, Any]:
    """SandboxFusion's RunCodeResponse for a plain run."""
    if r.verdict is Verdict.SANDBOX_ERROR:
        return {"status": "SandboxError", "message": r.message, "compile_result": None,
                "run_result": None, "executor_pod_name": None, "files": {}}  # fmt: skip
    compiled = r.extra.get("compile")
    compile_result = None
    if isinstance(compiled, dict):
        compile_result = {
            "status": "TimeLimitExceeded" if compiled.get("timed_out") else "Finished",
            "execution_time": compiled.get("wall_s"),
            "return_code": compiled.get("exit_code"),
            "stdout": compiled.get("stdout", ""),
            "stderr": compiled.get("stderr", ""),
        }
        if not compiled.get("ok"):
            return {"status": "Failed", "message": "", "compile_result": compile_result,
                    "run_result": None, "executor_pod_name": None, "files": {}}  # fmt: skip
    codes = r.extra.get("exit_codes") or [None]
    code = codes[0]
    timed_out = r.verdict is Verdict.TIMEOUT
    stderr = r.stderr
    outcome = r.tests[0] if r.tests else None
    if (
        job.language == "python"
        and outcome is not None
        and outcome.exception not in (None, "SystemExit")
    ):
        where = f'  File "main.py", line {outcome.line}\n' if outcome.line else ""
        stderr += (
            f"Traceback (most recent call last):\n{where}{outcome.exception}: {outcome.message}\n"
        )
    if code is None and not timed_out:
        code = -9  # killed from outside (an output or memory limit)
    run_result = {
        "status": "TimeLimitExceeded" if timed_out else "Finished",
        "execution_time": r.wall_s,
        "return_code": None if timed_out else code,
        "stdout": r.extra.get("stdout") or r.stdout,
        "stderr": stderr,
    }
    ok = not timed_out and code == 0
    limit_note = (
        r.message
        if r.verdict in (Verdict.OUTPUT_LIMIT, Verdict.MEMORY_LIMIT, Verdict.TIMEOUT)
        else ""
    )
    files = {
        p: base64.b64encode(d).decode()
        for p, d in (r.extra.get("files") or {}).items()
        if d is not None
    }
    return {"status": "Success" if ok else "Failed", "message": limit_note,
            "compile_result": compile_result, "run_result": run_result,
            "executor_pod_name": None, "files": files}  # fmt: skip


def _graded_job(
    req: GradedRun, config: ServerConfig, tasks_cache: dict[str, dict[str, Any]]
) -> Job:
    lang = _language(req.language)
    _check_size("code", req.code, config.max_code_bytes)
    if (req.tests is None) == (req.task is None):
        raise HTTPException(
            422, "give exactly one of `tests` (inline) and `task` (a benchmark task)"
        )
    entry_point = req.entry_point
    limits_in = dict(req.limits)
    if req.task is not None:
        task = _find_task(req.task, tasks_cache)
        tests = task.tests
        entry_point = entry_point or task.entry_point
        if "tests" in task.time_limits and "wall_s" not in limits_in:
            limits_in["wall_s"] = task.time_limits["tests"].wall_s
    else:
        assert req.tests is not None
        for n, case in enumerate(req.tests.cases):
            _check_size(f"tests.cases.{n}.stdin", case.get("stdin", ""), config.max_stdin_bytes)
        try:
            tests = wire.tests_from_json(req.tests.model_dump())
        except (ValueError, TypeError, KeyError) as exc:
            raise HTTPException(422, f"tests: {exc}") from None
    try:
        limits = wire.limits_from_json(limits_in)
    except (ValueError, TypeError) as exc:
        raise HTTPException(422, str(exc)) from None
    _check_limits(limits, config)
    return _make_job(
        program=req.code,
        tests=tests,
        entry_point=entry_point,
        limits=limits,
        strict_returns=req.strict_returns,
        allow_threads=req.allow_threads,
        id=req.id,
        language=lang,
        files=_decode_files(dict(req.files), config),
        fetch_files=tuple(req.fetch_files),
    )


def _check_limits(limits: Limits, config: ServerConfig) -> None:
    for name in ("wall_s", "test_wall_s", "cpu_s", "compile_wall_s"):
        _check_timeout(f"limits.{name}", getattr(limits, name), config)
    bounds = {
        "memory_mb": (16, config.max_memory_mb),
        "output_bytes": (1, 64 << 20),
        "file_size_mb": (1, 256),
        "open_files": (8, 4096),
        "processes": (1, 256),
        "scratch_mb": (1, 4096),
    }
    for name, (low, high) in bounds.items():
        value = getattr(limits, name)
        if type(value) is not int or not low <= value <= high:
            raise HTTPException(
                422, f"limits.{name}: {value!r} must be an integer in [{low}, {high}]"
            )


def _find_task(ref: TaskRef, cache: dict[str, dict[str, Any]]) -> Any:
    if ref.benchmark.startswith("jsonl:"):
        raise HTTPException(422, "task.benchmark: jsonl: paths are not served; send inline tests")
    if ref.benchmark not in cache:
        from execrl.tasks.registry import load_benchmark

        try:
            cache[ref.benchmark] = {t.id: t for t in load_benchmark(ref.benchmark)}
        except Exception as exc:  # noqa: BLE001 - unknown name, missing data: the client's to fix
            raise HTTPException(422, f"task.benchmark: {ref.benchmark!r}: {exc}") from None
    task = cache[ref.benchmark].get(ref.id)
    if task is None:
        raise HTTPException(422, f"task.id: no task {ref.id!r} in {ref.benchmark}")
    return task


# -- serving -------------------------------------------------------------------------------


def make_backend(config: ServerConfig) -> Backend:
    if config.ray_address is not None:
        from execrl.sandbox.ray_backend import RaySandbox

        return RaySandbox(
            address=config.ray_address,
            actors=config.ray_actors,
            workers_per_actor=config.workers,
            max_queue=config.max_queue,
            allow_missing_layers=config.allow_weaker_sandbox,
        )
    from execrl.sandbox.dispatch import Dispatcher
    from execrl.sandbox.pool import Sandbox

    sb = Sandbox(
        workers=config.workers,
        allow_missing_layers=config.allow_weaker_sandbox,
        max_retries=config.max_retries,
    )
    return Dispatcher(sb, max_queue=config.max_queue)


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
