"""`execrl serve-policy`: a policy behind an OpenAI-compatible endpoint, recording episodes.

    execrl serve-policy --model runs/RUN/final --port 8000 --record-dir recorded/
    OPENAI_API_KEY=$EXECRL_POLICY_TOKEN OPENAI_BASE_URL=http://127.0.0.1:8000/e/episode-1/v1 \
        python my_agent.py

Every call carries a token as its API key: the one in the variable `--token-env` names, or one
generated and printed at start. `POST /episodes` opens an episode with a key of its own, for a
harness that should reach that episode alone (`PolicyServer.access`).
Any program that speaks the OpenAI API (`/v1/chat/completions`, `/v1/completions`,
`/v1/models`) runs against the model; every call that names an episode (the `/e/<id>` path
prefix, the `X-Episode-Id` header or the `user` field) is recorded token-exactly
(`rl.episodes.recorder`): `GET /episodes/<id>` shows the trajectory so far, and with
--record-dir each call is appended to calls.jsonl as it is served and every episode's
trajectory is written to episodes.jsonl when the server stops (Ctrl-C or SIGTERM).
To train on a harness's episodes, name it in the config instead (`[env] name = "harness"`);
docs/harness.md.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import sys
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ENGINES_SERVED = ("loop", "hf")  # in-process engines; a vLLM server serves itself
TOKEN_ENV = "EXECRL_POLICY_TOKEN"


@dataclass(frozen=True, slots=True)
class ServePolicyConfig:
    """What `execrl serve-policy` serves and how; checked before the model loads."""

    model: str = "default"  # a model directory in Hugging Face format, a hub id, or "default"
    host: str = "127.0.0.1"  # the address to listen on (0.0.0.0 exposes it to the network)
    port: int = 8000  # 0: any free port (printed on stderr)
    chat: str = "auto"  # auto (the chat template when there is one) | on | off (concatenate)
    temperature: float = 1.0  # the default of a call that names none
    top_p: float = 1.0
    max_new_tokens: int = 256  # one call's budget; a call's max_tokens is capped at it
    fixed_sampling: bool = False  # ignore a call's temperature and top_p (as training does)
    engine: str = "loop"  # loop | hf
    device: str = "auto"  # cpu | cuda | auto
    record_dir: str = ""  # calls.jsonl and episodes.jsonl go here ("" keeps them in memory)
    model_name: str = "policy"  # the id /v1/models lists
    token_env: str = TOKEN_ENV  # the variable holding the token calls carry (unset: generated)

    def __post_init__(self) -> None:
        if self.chat not in ("auto", "on", "off"):
            raise ValueError(f"--chat {self.chat!r}: choose auto, on or off")
        if self.engine not in ENGINES_SERVED:
            raise ValueError(f"--engine {self.engine!r}: choose one of {', '.join(ENGINES_SERVED)}")
        if not 0 <= self.port <= 65535:
            raise ValueError(f"--port {self.port}: a port is 0 to 65535")
        if self.temperature < 0 or not 0 < self.top_p <= 1 or self.max_new_tokens < 1:
            raise ValueError("--temperature must be >= 0, --top-p in (0, 1], --max-new-tokens >= 1")
        if self.record_dir and Path(self.record_dir).is_file():
            raise ValueError(f"--record-dir {self.record_dir}: is a file, not a directory")
        if not self.token_env:
            raise ValueError("--token-env: name an environment variable")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "serve-policy",
        help="serve a policy as an OpenAI-compatible endpoint that records episodes token-exactly",
        description="Serve a model through /v1/chat/completions, /v1/completions and "
        "/v1/models for any agent harness; calls that name an episode (the /e/<id>/v1 base URL, "
        "the X-Episode-Id header or the `user` field) are recorded token-exactly. "
        "docs/harness.md.",
    )
    d = ServePolicyConfig()
    p.add_argument("--model", default=d.model, help="model directory, hub id or 'default'")
    p.add_argument("--host", default=d.host, help=f"address to listen on (default {d.host})")
    p.add_argument("--port", type=int, default=d.port, help=f"0: any free port (default {d.port})")
    p.add_argument("--chat", default=d.chat, help="auto | on | off: render chat messages "
                   "through the model's template (off: their contents in order)")  # fmt: skip
    p.add_argument("--temperature", type=float, default=d.temperature)
    p.add_argument("--top-p", type=float, default=d.top_p)
    p.add_argument("--max-new-tokens", type=int, default=d.max_new_tokens,
                   help="the most tokens of one call (caps a call's max_tokens)")  # fmt: skip
    p.add_argument("--fixed-sampling", action="store_true",
                   help="always --temperature and --top-p, whatever a call asks (as training)")  # fmt: skip
    p.add_argument("--engine", default=d.engine, help="loop | hf (models.engines.engine)")
    p.add_argument("--device", default=d.device, help="cpu | cuda | auto")
    p.add_argument("--record-dir", default=d.record_dir,
                   help="write calls.jsonl (as served) and episodes.jsonl (at exit) here")  # fmt: skip
    p.add_argument("--model-name", default=d.model_name, help="the model id /v1/models lists")
    p.add_argument("--token-env", default=d.token_env,
                   help="the environment variable holding the token every call must carry as "
                   f"its API key (default {d.token_env}); unset: one is generated and printed")  # fmt: skip
    p.set_defaults(handler=_serve)


def _serve(args: argparse.Namespace) -> int:
    try:
        config = ServePolicyConfig(
            args.model, args.host, args.port, args.chat, args.temperature, args.top_p,
            args.max_new_tokens, args.fixed_sampling, args.engine, args.device, args.record_dir,
            args.model_name, args.token_env,
        )  # fmt: skip
    except ValueError as e:
        return _error(e)
    try:
        server, record = _build(config)
    except (ImportError, FileNotFoundError, ValueError) as e:
        return _error(e)  # no model there, a missing package
    except OSError as e:  # the address: a port in use, a host not of this machine
        return _error(f"cannot listen on {config.host}:{config.port} ({e.strerror or e}); "
                      "choose another --port (0: any free port) or --host")  # fmt: skip
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    server.start()
    if not os.environ.get(config.token_env):
        print(f"execrl serve-policy: ${config.token_env} is unset; calls must carry this token "
              f"as their API key: {server.token}", file=sys.stderr, flush=True)  # fmt: skip
    print(f"execrl serve-policy: serving {config.model} at {server.url}/v1 "
          f"(episode N: {server.url}/e/N/v1); Ctrl-C stops", file=sys.stderr, flush=True)  # fmt: skip
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    server.close()
    if record is not None:
        record.write_episodes(server.recorder)
    return 0


def _build(config: ServePolicyConfig) -> tuple[Any, Any]:
    import torch

    from execrl.models.engines.engine_factory import make_engine
    from execrl.models.engines.sampling import SamplingParams
    from execrl.models.loading.loading import load_policy
    from execrl.models.prompting.chat import chat_wanted, uses_chat_template
    from execrl.rl.episodes.harness import context_length
    from execrl.rl.episodes.policy_server import PolicyServer, ServeSettings, stderr_log
    from execrl.rl.episodes.recorder import Recorder

    device = config.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    policy = load_policy(config.model, device=device)
    policy.model.eval()
    tokenizer = policy.tokenizer
    chat = uses_chat_template(tokenizer, chat_wanted(config.chat))
    if chat and not getattr(tokenizer, "chat_template", None):
        raise ValueError(f"--chat on: the tokenizer of {config.model} has no chat template")
    engine = make_engine(config.engine, policy.model, tokenizer)
    sampling = SamplingParams(config.temperature, config.top_p, config.max_new_tokens)
    settings = ServeSettings(config.model_name, chat, sampling, config.fixed_sampling,
                             context_length(engine))  # fmt: skip
    record = CallLog(Path(config.record_dir)) if config.record_dir else None
    token = os.environ.get(config.token_env) or secrets.token_urlsafe(32)
    server = PolicyServer(engine, tokenizer, settings, Recorder(tokenizer), host=config.host,
                          port=config.port, token=token, log=stderr_log,
                          on_record=record.call if record else None)  # fmt: skip
    return server, record


class CallLog:
    """--record-dir: calls.jsonl as calls are served, episodes.jsonl when the server stops."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self._lock = threading.Lock()

    def call(self, episode_id: str, record: Any) -> None:
        line = json.dumps({"episode_id": episode_id, **asdict(record)})
        with self._lock, (self.directory / "calls.jsonl").open("a") as f:
            f.write(line + "\n")

    def write_episodes(self, recorder: Any) -> None:
        from execrl.rl.episodes.openai_wire import recording_json

        recordings = [recorder.get(i) for i in recorder.episode_ids()]
        lines = [json.dumps(recording_json(r)) for r in recordings if r is not None]
        path = self.directory / "episodes.jsonl"
        temporary = path.with_suffix(".jsonl.tmp")
        temporary.write_text("".join(line + "\n" for line in lines))
        temporary.replace(path)  # a reader never sees half a file
        print(f"execrl serve-policy: {len(lines)} episodes written to {path}", file=sys.stderr)


def _error(e: BaseException) -> int:
    print(f"execrl serve-policy: error: {e}", file=sys.stderr)
    return 2
