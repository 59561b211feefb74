"""Clients of `execrl sandbox serve`: sync (httpx) and async (aiohttp).

Retries are for the infrastructure only: a refused or dropped connection, a timeout, and the
server's 429/502/503/504 (honouring Retry-After). An answer with a verdict is final, whatever
the verdict: the program's failures are never retried, and SANDBOX_ERROR has already been
retried by the server's pool. Any other 4xx/5xx raises `SandboxServerError` at once, with the
server's message (it names the field at fault).
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Sequence
from typing import Any

import httpx

from execrl.sandbox.grading.job import Job
from execrl.sandbox.grading.verdict import ExecutionResult
from execrl.sandbox.service import wire

RETRY_STATUS = frozenset({429, 502, 503, 504})


class SandboxServerError(RuntimeError):
    """The server refused the request (status, detail), or retries ran out."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def _delay(attempt: int, retry_after: str | None, base: float, cap: float) -> float:
    after = retry_after or ""
    if after.replace(".", "", 1).isdigit():
        return min(float(after), cap) * (1 + 0.2 * random.random())
    return min(cap, base * 2 ** (attempt - 1)) * (0.5 + random.random())


def _detail(text: str) -> str:
    try:
        return str(json.loads(text).get("detail", text))
    except (ValueError, AttributeError):
        return text


def _final(response: httpx.Response, url: str) -> Any:
    if response.status_code == 200:
        return response.json()
    raise SandboxServerError(
        f"{url}: HTTP {response.status_code}: {_detail(response.text)}", response.status_code
    )


class _Base:
    def __init__(
        self,
        url: str = "http://127.0.0.1:8080",
        token: str | None = None,
        timeout_s: float = 600.0,
        retries: int = 5,
        backoff_s: float = 0.2,
        max_backoff_s: float = 10.0,
        batch_size: int = 64,
    ) -> None:
        self.url = url.rstrip("/")
        self.token, self.timeout_s, self.retries = token, timeout_s, retries
        self.backoff_s, self.max_backoff_s, self.batch_size = backoff_s, max_backoff_s, batch_size

    def _give_up(self, path: str, last: str) -> SandboxServerError:
        return SandboxServerError(
            f"{self.url}{path}: gave up after {self.retries + 1} attempts: {last}"
        )


class SandboxClient(_Base):
    """Blocking client. Use as a context manager (it keeps a connection pool)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._http = httpx.Client(timeout=self.timeout_s, headers=_headers(self.token))

    def _post(self, path: str, body: dict[str, Any]) -> Any:
        return self._request("POST", path, body)

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        last = ""
        for attempt in range(1, self.retries + 2):
            response = None
            try:
                response = self._http.request(method, self.url + path, json=body)
                if response.status_code not in RETRY_STATUS:
                    return _final(response, self.url + path)
                last = f"HTTP {response.status_code}"
            except httpx.TransportError as exc:
                last = f"{type(exc).__name__}: {exc}"
            if attempt <= self.retries:
                after = response.headers.get("retry-after") if response is not None else None
                time.sleep(_delay(attempt, after, self.backoff_s, self.max_backoff_s))
        raise self._give_up(path, last)

    def run(self, job: Job) -> ExecutionResult:
        return wire.result_from_json(self._post("/v1/run", wire.job_to_json(job)))

    def run_many(self, jobs: Sequence[Job]) -> list[ExecutionResult]:
        out: list[ExecutionResult] = []
        for start in range(0, len(jobs), self.batch_size):
            chunk = [wire.job_to_json(j) for j in jobs[start : start + self.batch_size]]
            reply = self._post("/v1/run_batch", {"runs": chunk})
            out.extend(wire.result_from_json(r) for r in reply["results"])
        return out

    def run_code(self, code: str, language: str = "python", **fields: Any) -> dict[str, Any]:
        """SandboxFusion's /run_code: fields are stdin, run_timeout, compile_timeout, files..."""
        return self._post("/run_code", {"code": code, "language": language, **fields})

    def health(self) -> dict[str, Any]:
        return self._request("GET", "/health")

    def metrics(self) -> str:
        response = self._http.get(self.url + "/metrics")
        response.raise_for_status()
        return response.text

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> SandboxClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncSandboxClient(_Base):
    """asyncio client (aiohttp: a tenth of httpx's CPU per request under concurrency, which
    matters when the client shares the cores with the sandbox); `run_many` sends its batches
    concurrently. Use as an async context manager."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._session: Any = None

    def _http(self) -> Any:
        import aiohttp

        if self._session is None:
            self._session = aiohttp.ClientSession(
                headers=_headers(self.token),
                timeout=aiohttp.ClientTimeout(total=self.timeout_s),
                connector=aiohttp.TCPConnector(limit=256),
            )
        return self._session

    async def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        import aiohttp

        last = ""
        for attempt in range(1, self.retries + 2):
            status, retry_after = None, None
            try:
                async with self._http().request(method, self.url + path, json=body) as response:
                    status = response.status
                    if status == 200:
                        return await response.json()
                    text = await response.text()
                    if status not in RETRY_STATUS:
                        raise SandboxServerError(
                            f"{self.url}{path}: HTTP {status}: {_detail(text)}", status
                        )
                    retry_after = response.headers.get("retry-after")
                    last = f"HTTP {status}"
            except (TimeoutError, aiohttp.ClientConnectionError) as exc:
                last = f"{type(exc).__name__}: {exc}"
            if attempt <= self.retries:
                await asyncio.sleep(
                    _delay(attempt, retry_after, self.backoff_s, self.max_backoff_s)
                )
        raise self._give_up(path, last)

    async def run(self, job: Job) -> ExecutionResult:
        return wire.result_from_json(await self._request("POST", "/v1/run", wire.job_to_json(job)))

    async def run_many(self, jobs: Sequence[Job]) -> list[ExecutionResult]:
        async def batch(chunk: Sequence[Job]) -> list[ExecutionResult]:
            body = {"runs": [wire.job_to_json(j) for j in chunk]}
            reply = await self._request("POST", "/v1/run_batch", body)
            return [wire.result_from_json(r) for r in reply["results"]]

        chunks = [jobs[i : i + self.batch_size] for i in range(0, len(jobs), self.batch_size)]
        parts = await asyncio.gather(*(batch(c) for c in chunks))
        return [r for part in parts for r in part]

    async def run_code(self, code: str, language: str = "python", **fields: Any) -> dict[str, Any]:
        return await self._request(
            "POST", "/run_code", {"code": code, "language": language, **fields}
        )

    async def health(self) -> dict[str, Any]:
        return await self._request("GET", "/health")

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> AsyncSandboxClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
