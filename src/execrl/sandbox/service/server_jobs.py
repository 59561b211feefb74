"""Requests of `execrl sandbox serve` turned into jobs, and results into SandboxFusion's
response: the request models, every bound a request is checked against (a 4xx naming the field,
never a 500), and the mapping of verdicts onto `run_code`'s fields."""

from __future__ import annotations

import base64
import binascii
from typing import Any, Literal

from fastapi import HTTPException
from pydantic import BaseModel, ConfigDict

from execrl.sandbox.grading import languages
from execrl.sandbox.grading.job import Job
from execrl.sandbox.grading.limits import Limits
from execrl.sandbox.grading.verdict import ExecutionResult, Verdict
from execrl.sandbox.service import wire
from execrl.sandbox.service.server_config import ServerConfig
from execrl.tasks.schema import Compare, StdioCase, StdioTests

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
    # stdin/stdout tests: stop at the first failing case (`Job.stop_at_first_failure`)
    stop_at_first_failure: bool = False


class Batch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    runs: list[GradedRun]


# -- requests to jobs ----------------------------------------------------------------------


def _check_timeout(name: str, value: float | None, config: ServerConfig) -> None:
    if value is None:
        return
    if not (isinstance(value, int | float) and 0 < value <= config.max_timeout_s):
        raise HTTPException(
            422, f"{name}: {value!r} must be a number of seconds in (0, {config.max_timeout_s:g}]"
        )


def check_text(request: BaseModel) -> None:
    """Every string of the request (but call-test values, which travel as tagged JSON) must be
    text UTF-8 can encode: JSON's `\\ud800` escape decodes to a lone surrogate, which the worker
    cannot write (a file named so killed the worker, on every retry)."""
    stack: list[tuple[str, Any]] = [("", request)]
    while stack:
        where, node = stack.pop()
        if isinstance(node, BaseModel):
            node = {k: v for k, v in vars(node).items() if k not in _VALUES or where != "tests"}
        if isinstance(node, str):
            try:
                node.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise HTTPException(
                    422, f"{where}: not valid text (a lone surrogate at character {exc.start})"
                ) from None
        elif isinstance(node, dict):
            for key, value in node.items():
                name = f"{where}.{key}" if where else str(key)
                stack += [(name, value), (f"{where or 'body'}: the key {key!r}", key)]
        elif isinstance(node, list):
            stack.extend((f"{where}.{n}", value) for n, value in enumerate(node))


_VALUES = frozenset({"inputs", "expected"})


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


def run_code_job(req: RunCodeRequest, config: ServerConfig) -> Job:
    check_text(req)
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


def graded_job(req: GradedRun, config: ServerConfig, loaded: dict[str, dict[str, Any]]) -> Job:
    check_text(req)
    lang = _language(req.language)
    _check_size("code", req.code, config.max_code_bytes)
    if (req.tests is None) == (req.task is None):
        raise HTTPException(
            422, "give exactly one of `tests` (inline) and `task` (a benchmark task)"
        )
    entry_point = req.entry_point
    limits_in = dict(req.limits)
    program = req.code
    if req.task is not None:
        task = _find_task(req.task, loaded)
        program = task.with_prelude(req.code)
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
            detail = str(exc) if str(exc).startswith("tests") else f"tests: {exc}"
            raise HTTPException(422, detail) from None
    try:
        limits = wire.limits_from_json(limits_in)
    except (ValueError, TypeError) as exc:
        raise HTTPException(422, str(exc)) from None
    _check_limits(limits, config)
    return _make_job(
        program=program,
        tests=tests,
        entry_point=entry_point,
        limits=limits,
        strict_returns=req.strict_returns,
        allow_threads=req.allow_threads,
        id=req.id,
        language=lang,
        files=_decode_files(dict(req.files), config),
        fetch_files=tuple(req.fetch_files),
        stop_at_first_failure=req.stop_at_first_failure,
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


def _find_task(ref: TaskRef, loaded: dict[str, dict[str, Any]]) -> Any:
    """The task a request named, from the sets loaded for it (`server_tasks.TaskSets`, off the
    event loop, before the request's jobs are made)."""
    task = loaded[ref.benchmark].get(ref.id)
    if task is None:
        raise HTTPException(422, f"task.id: no task {ref.id!r} in {ref.benchmark}")
    return task
