"""The policy behind an OpenAI-compatible HTTP endpoint, recording every call token-exactly.

    server = PolicyServer(engine, tokenizer, ServeSettings(...), Recorder(tokenizer))
    base = server.start()             # http://127.0.0.1:PORT
    ... a harness posts to {base}/e/EPISODE/v1/chat/completions ...
    recording = server.recorder.close("EPISODE")
    server.close()

Routes: `POST /v1/chat/completions`, `POST /v1/completions`, `GET /v1/models`, each also under
`/e/<episode id>/v1/...`; `GET /episodes/<episode id>` (the recording so far, as JSON) and
`GET /health`; `POST /episodes` opens an episode with a key of its own. A call's episode id
is, first found: the `/e/<id>` prefix of its path (so a harness that only lets one set
OPENAI_BASE_URL records), the `X-Episode-Id` header, the body's `user` field. A call without
one is served and not recorded.

Who may call (`PolicyServer.access`): a call carrying an episode's key as its API key
(`Authorization: Bearer KEY`) records into that episode alone, whatever id it names. With a
`token` (serve-policy), a call carrying it may name any episode not opened with a key; any
other call is refused (401). In training (a strict recorder, no token) only keys count.

Generation goes through the rollout engine (`models.engines.engine.RolloutEngine`) from one worker
thread: calls that arrive within `batch_wait_s` of each other with the same sampling
parameters share one `generate` call, so parallel harness episodes batch like rollouts do.
With `fixed_sampling` (training) the run's temperature and top-p are used whatever a call asks,
because the loss needs behaviour log-probabilities at the trainer's temperature; a call's
`max_tokens` is capped at the run's budget and its `stop` is honoured.

What a call may ask and what its answer holds is `openai_wire.py`. `stream: true` is answered
as a stream of one content chunk (the whole completion), the finish chunk and `[DONE]`.
"""

from __future__ import annotations

import hmac
import json
import queue
import re
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from execrl.models.engines.sampling import Completion, SamplingParams
from execrl.rl.episodes.openai_wire import (
    BadRequest,
    CallRequest,
    answer_json,
    parse_call,
    recording_json,
    stream_chunks,
)
from execrl.rl.episodes.recorder import CallRecord, Recorder, Ticket, UnknownEpisode

_ROUTE = re.compile(r"^(?:/e/(?P<episode>[^/]+))?(?P<route>/v1/[a-z/]+|/episodes(?:/.+)?|/health)$")
MAX_BODY = 16 * 2**20  # bytes of one request


@dataclass(frozen=True, slots=True)
class ServeSettings:
    """How the server samples and what it calls its model."""

    model_name: str = "policy"  # what /v1/models lists (any name a call sends is accepted)
    chat: bool = True  # render chat messages through the tokenizer's template (else concatenate)
    sampling: SamplingParams = SamplingParams(temperature=1.0, max_new_tokens=256)
    fixed_sampling: bool = False  # training: always the run's temperature and top-p
    # a call's prompt + completion fit in it: the model's context, or a smaller token budget
    # (training: env.max_tokens); 0: unchecked
    max_positions: int = 0
    batch_wait_s: float = 0.01  # how long the worker waits for more calls to batch


class Batcher:
    """One worker thread owns the engine; calls queue (prompt ids, params) and wait."""

    def __init__(self, engine: Any, wait_s: float) -> None:
        self.engine, self.wait_s = engine, wait_s
        self._queue: queue.Queue = queue.Queue()
        self._busy = 0  # calls queued or generating
        self._idle = threading.Condition()
        self._thread = threading.Thread(target=self._work, name="execrl-policy", daemon=True)
        self._thread.start()

    def generate(self, prompt_ids: tuple[int, ...], params: SamplingParams) -> Completion:
        future: Future = Future()
        with self._idle:
            self._busy += 1
        self._queue.put((prompt_ids, params, future))
        return future.result()

    def wait_idle(self, timeout_s: float) -> bool:
        """Until no call is queued or generating (the trainer may then change the weights)."""
        with self._idle:
            return self._idle.wait_for(lambda: self._busy == 0, timeout_s)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=30)

    def _work(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            deadline = time.monotonic() + self.wait_s
            while (left := deadline - time.monotonic()) > 0:
                try:
                    item = self._queue.get(timeout=left)
                except queue.Empty:
                    break
                if item is None:
                    self._queue.put(None)  # stop after this batch
                    break
                batch.append(item)
            by_params: dict[SamplingParams, list] = {}
            for item in batch:
                by_params.setdefault(item[1], []).append(item)
            for params, items in by_params.items():
                self._run(params, items)

    def _run(self, params: SamplingParams, items: list) -> None:
        try:
            completions = self.engine.generate([ids for ids, _, _ in items], params, n=1)
        except Exception as exc:  # noqa: BLE001 - handed to each waiting call
            for _, _, future in items:
                future.set_exception(exc)
        else:
            for (_, _, future), completion in zip(items, completions, strict=True):
                future.set_result(completion)
        with self._idle:
            self._busy -= len(items)
            self._idle.notify_all()


class Denied(Exception):
    """A call its API key does not allow: 401 (no key the server knows) or 403 (another's
    episode)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class _HTTPServer(ThreadingHTTPServer):
    # the listen backlog: the default 5 drops the connections of many parallel harnesses
    # arriving together (a dropped SYN is retried a second later)
    request_queue_size = 256


class PolicyServer:
    """The HTTP server and its generation worker, on 127.0.0.1 unless told otherwise."""

    def __init__(self, engine: Any, tokenizer: Any, settings: ServeSettings,
                 recorder: Recorder, *, host: str = "127.0.0.1", port: int = 0,
                 token: str | None = None, log: Callable[[str], None] | None = None,
                 on_record: Callable[[str, CallRecord], None] | None = None) -> None:  # fmt: skip
        self.tokenizer, self.settings, self.recorder = tokenizer, settings, recorder
        self.token = token  # the API key of a trusted caller (`access`); None: no such caller
        self.on_record = on_record  # told of each recorded call (episode id, record)
        self.batcher = Batcher(engine, settings.batch_wait_s)
        self.log = log or (lambda message: None)
        self.httpd = _HTTPServer((host, port), _handler(self))
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> str:
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True,
                                        name="execrl-policy-http")  # fmt: skip
        self._thread.start()
        return self.url

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.batcher.close()

    def __enter__(self) -> PolicyServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- one call --------------------------------------------------------------------------

    def access(self, credential: str, named: str) -> tuple[str, bool]:
        """(the episode a call with API key `credential` naming episode `named` records into,
        "" for none; whether it may open it), or `Denied`. An episode's key records into that
        episode alone; the server's token (`token`), or anyone on a server with neither a token
        nor a strict recorder, into any episode not opened with a key, opened on first use."""
        mine = self.recorder.episode_of(credential) if credential else None
        if mine is not None:
            if named and named != mine:
                raise Denied(
                    403, f"this API key is episode {mine!r}'s; it cannot call into {named!r}"
                )
            return mine, False
        if not self._trusted(credential):
            raise Denied(401, self._needs)
        if named and self.recorder.keyed(named):
            raise Denied(403, f"episode {named!r} was opened with a key: only calls carrying that "
                         "key record into it")  # fmt: skip
        return named, True

    def may_read(self, credential: str, episode_id: str) -> bool:
        """GET /episodes/<id>: its own key, or a trusted caller (`access`)."""
        mine = self.recorder.episode_of(credential) if credential else None
        return mine == episode_id if mine is not None else self._trusted(credential)

    def open_episode(self, credential: str) -> dict[str, str]:
        """POST /episodes: a new episode and its key, for a harness the caller hands them to."""
        if not self._trusted(credential):
            raise Denied(401, self._needs)
        episode_id = f"ep-{uuid.uuid4().hex}"
        key = self.recorder.open(episode_id)
        return {"episode_id": episode_id, "key": key, "base_url": f"{self.url}/e/{episode_id}/v1"}

    def _trusted(self, credential: str) -> bool:
        if self.token is not None:
            given = credential.encode("utf-8", "replace")
            return bool(credential) and hmac.compare_digest(given, self.token.encode())
        return not self.recorder.strict

    @property
    def _needs(self) -> str:
        if self.token is not None:
            return ("a call needs the server's token (or an episode's key) as its API key: "
                    "Authorization: Bearer ..., as OpenAI clients send OPENAI_API_KEY")  # fmt: skip
        return ("this server records episodes: a call must carry its episode's key as its API "
                "key (OPENAI_API_KEY, as its harness was given it)")  # fmt: skip

    def serve(
        self, request: CallRequest, credential: str = ""
    ) -> tuple[Completion, CallRecord | None, Ticket | None]:
        """Generate for one call, recording it into the episode its key (or, for a trusted
        caller, its name) gives (`access`)."""
        ticket = None
        episode_id, open_new = self.access(credential, request.episode_id)
        if episode_id:
            ticket = self.recorder.admit(episode_id, request.text, raw=request.raw,
                                         open_new=open_new)  # fmt: skip
            prompt = ticket.prompt_ids
        else:
            prompt = self.recorder.encode(request.text, raw=request.raw)
        try:
            params = self._fit(request.params, len(prompt))
            done = self.batcher.generate(prompt, params)
        except BaseException:
            if ticket is not None:
                self.recorder.release(ticket)
            raise
        record = None
        if ticket is not None:
            record = self.recorder.land(ticket, done.token_ids.tolist(), done.logprobs.tolist(),
                                        done.text, done.finish, params.temperature)  # fmt: skip
            if self.on_record is not None:
                self.on_record(ticket.episode_id, record)
        return done, record, ticket

    def _fit(self, params: SamplingParams, prompt_tokens: int) -> SamplingParams:
        """The budget cut to what the model's context leaves after the prompt."""
        limit = self.settings.max_positions
        if not limit:
            return params
        if prompt_tokens >= limit:
            raise BadRequest(
                f"the prompt has {prompt_tokens} tokens; a call's limit is {limit} (the "
                "model's context, or the run's env.max_tokens): shorten the conversation"
            )
        return replace(params, max_new_tokens=min(params.max_new_tokens, limit - prompt_tokens))


def _handler(server: PolicyServer) -> type[BaseHTTPRequestHandler]:
    return type("Handler", (_Handler,), {"policy": server})


class _Handler(BaseHTTPRequestHandler):
    """The HTTP routes of a `PolicyServer` (`policy`, set per server by `_handler`)."""

    policy: PolicyServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        self.policy.log(f"serve-policy: {self.address_string()} {format % args}")

    def do_GET(self) -> None:  # noqa: N802 - the base's name
        match = _ROUTE.match(self.path.split("?")[0])
        route = match["route"] if match else ""
        if route == "/health":
            return self._json(200, {"ok": True})
        if route == "/v1/models":
            model = {"id": self.policy.settings.model_name, "object": "model", "owned_by": "execrl"}
            return self._json(200, {"object": "list", "data": [model]})
        if route.startswith("/episodes/"):
            episode_id = route.removeprefix("/episodes/")
            if not self.policy.may_read(self._credential(), episode_id):
                return self._error(401, "only the episode's key or the server's token reads it")
            recording = self.policy.recorder.get(episode_id)
            if recording is None:
                return self._error(404, "no such episode on this server")
            return self._json(200, recording_json(recording))
        return self._error(404, f"no route GET {self.path}")

    def do_POST(self) -> None:  # noqa: N802 - the base's name
        match = _ROUTE.match(self.path.split("?")[0])
        route = match["route"] if match else ""
        credential = self._credential()
        if route == "/episodes" and not match["episode"]:
            try:
                return self._json(200, self.policy.open_episode(credential))
            except Denied as exc:
                return self._error(exc.status, str(exc))
        if route not in ("/v1/chat/completions", "/v1/completions"):
            return self._error(404, f"no route POST {self.path}")
        # a refusal is noted with the caller's own episode, never one it merely names
        named = self.policy.recorder.episode_of(credential) if credential else None
        try:
            body = self._body()
            request = parse_call(route, body, match["episode"] or "",
                                 self.headers.get("X-Episode-Id", ""), self.policy.tokenizer,
                                 self.policy.settings.chat, self.policy.settings.sampling,
                                 self.policy.settings.fixed_sampling)  # fmt: skip
            done, record, ticket = self.policy.serve(request, credential)
        except Denied as exc:
            return self._refuse(named, exc.status, str(exc))
        except BadRequest as exc:
            return self._refuse(named, 400, str(exc))
        except UnknownEpisode as exc:
            return self._refuse(named, 404, str(exc))
        except Exception as exc:  # noqa: BLE001 - the engine failed: say so to the harness
            self.policy.log(f"serve-policy: generation failed: {type(exc).__name__}: {exc}")
            return self._refuse(named, 500, f"generation failed: {type(exc).__name__}: {exc}")
        answer = answer_json(self.policy.settings.model_name, request, done, record, ticket)
        if request.stream:
            return self._stream(request, answer)
        return self._json(200, answer)

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        if not 0 < length <= MAX_BODY:
            raise BadRequest(f"a request body of 1 to {MAX_BODY} bytes is needed")
        try:
            body = json.loads(self.rfile.read(length))
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise BadRequest("the request body is not JSON") from None
        if not isinstance(body, dict):
            raise BadRequest("the request body must be a JSON object")
        return body

    def _stream(self, request: CallRequest, answer: dict[str, Any]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        for chunk in stream_chunks(request, answer):
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")

    def _refuse(self, episode_id: str | None, status: int, message: str) -> None:
        """An error answer, also kept with the caller's episode (a harness that fails on it
        may not say why; the episode's note will)."""
        if episode_id:
            self.policy.recorder.refused(episode_id, f"HTTP {status}: {message}")
        self._error(status, message)

    def _credential(self) -> str:
        """The call's API key (`Authorization: Bearer KEY`), "" when it sends none."""
        scheme, _, key = self.headers.get("Authorization", "").partition(" ")
        return key.strip() if scheme.lower() == "bearer" else ""

    def _json(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str) -> None:
        kind = "invalid_request_error" if status < 500 else "server_error"
        self._json(status, {"error": {"message": message, "type": kind, "code": status}})


def stderr_log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
