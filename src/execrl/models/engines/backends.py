"""Text generators for evaluation: a Hugging Face causal LM in this process, or any server that
speaks the OpenAI completions API (vLLM, SGLang, llama.cpp's server, TGI).

Both take prompt texts and give back n raw completions per prompt; what the text means as a
program is decided by the caller (`eval.generation`). A model is named `openai:URL#MODEL` for a
server, and by a path, hub id, known model or `default` otherwise (`models.loading.loading`). A
local model generates with one of the rollout engines (`models.engines.engine`: execrl's loop,
Hugging Face `generate`, or vLLM, which loads the model directory itself and holds the only copy).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from execrl.models.prompting.chat import chat_wanted, uses_chat_template

OPENAI_PREFIX = "openai:"


@dataclass(frozen=True, slots=True)
class GenerationParams:
    temperature: float = 0.0  # 0 means greedy
    top_p: float = 1.0
    max_new_tokens: int = 512
    stop: tuple[str, ...] = ()  # besides eos (the prompt style's: `eval.prompt_style`)
    batch_size: int = 16  # sequences per generate call (HF) or per request (server)
    # the stop rules (`models.engines.stop_rules`), in-process only: a server stops at eos and
    # `stop`
    code_end: bool = False
    repeat_ngram: int = 0
    code_language: str = "python"  # the language whose block ends a row (code_end)
    reply_prefix: str = ""  # the start of the model's reply, after the chat template


class Generator(Protocol):
    chat: bool  # whether prompts go through a chat template (instruct models)

    def generate(self, prompts: Sequence[str], n: int, params: GenerationParams) -> list[list[str]]:
        """n raw completions for each prompt, in prompt order."""
        ...


def open_generator(model: str, *, chat: str = "auto", device: str = "auto", engine: str = "loop",
                   dtype: str = "") -> Generator:  # fmt: skip
    """The generator a `--model` argument names; chat is auto | on | off; engine is loop | hf |
    vllm (a local model's); dtype is float32 | bfloat16 | float16, "" for the engine's default
    (float32 on a CPU, bfloat16 on a GPU)."""
    if model.startswith(OPENAI_PREFIX):
        url, sep, name = model[len(OPENAI_PREFIX) :].partition("#")
        if not sep or not url or not name:
            raise ValueError(
                f"--model {model!r}: a server is named openai:URL#MODEL, "
                "e.g. openai:http://localhost:8000/v1#Qwen/Qwen2.5-Coder-7B-Instruct"
            )
        return OpenAIGenerator(url, name, chat=chat == "on")
    if engine == "vllm":
        return VLLMGenerator(model, chat=chat, dtype=dtype)
    return HFGenerator(model, chat=chat, device=device, engine=engine, dtype=dtype)


def _default_dtype(device: str) -> str:
    return "bfloat16" if device.startswith("cuda") else "float32"


class HFGenerator:
    """A transformers causal LM in this process, generating with execrl's decode loop ("loop")
    or Hugging Face `generate` ("hf"); prompts through its chat template when it has one."""

    def __init__(self, model: str, *, chat: str = "auto", device: str = "auto",
                 engine: str = "loop", dtype: str = "") -> None:  # fmt: skip
        import torch

        from execrl.models.loading.loading import load_policy

        if engine not in ("loop", "hf"):
            raise ValueError(f"an in-process generator's engine is 'loop' or 'hf', not {engine!r}")
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.engine = engine
        self.policy = load_policy(model, device=device, dtype=dtype or _default_dtype(device))
        self.policy.model.eval()
        self.chat = uses_chat_template(self.policy.tokenizer, chat_wanted(chat))

    def generate(self, prompts: Sequence[str], n: int, params: GenerationParams) -> list[list[str]]:
        from execrl.models.engines.sampling import encode_prompts, sample

        tokenizer = self.policy.tokenizer
        ids = encode_prompts(tokenizer, prompts, chat=self.chat, reply_prefix=params.reply_prefix)
        sampling = _sampling_params(params, engine=self.engine)
        return _texts(sample(self.policy.model, tokenizer, ids, sampling, n=n), n)

    def close(self) -> None:
        del self.policy  # the weights go with the last reference


class VLLMGenerator:
    """vLLM over the model's directory (`models.engines.vllm_engine`): the engine loads it itself,
    so no second copy of the weights is held here. Sampling as the rollout engine samples, with
    the same stop rules, so a run's evaluation and `execrl eval --engine vllm` agree."""

    def __init__(self, model: str, *, chat: str = "auto", dtype: str = "",
                 max_model_len: int = 4096) -> None:  # fmt: skip
        from execrl.models.engines.vllm_engine import VLLMEngine
        from execrl.models.loading.loading import load_tokenizer, resolve_model_path

        source, _ = resolve_model_path(model)
        self.tokenizer = load_tokenizer(model)
        self.chat = uses_chat_template(self.tokenizer, chat_wanted(chat))
        self.engine = VLLMEngine(None, self.tokenizer, directory=Path(source), dtype=dtype,
                                 max_model_len=max_model_len)  # fmt: skip

    def generate(self, prompts: Sequence[str], n: int, params: GenerationParams) -> list[list[str]]:
        from execrl.models.engines.sampling import encode_prompts

        ids = encode_prompts(self.tokenizer, prompts, chat=self.chat,
                             reply_prefix=params.reply_prefix)  # fmt: skip
        return _texts(self.engine.generate(ids, _sampling_params(params), n=n), n)

    def close(self) -> None:
        self.engine.close()


def _sampling_params(params: GenerationParams, engine: str = "loop") -> Any:
    """The models layer's `SamplingParams` for an evaluation's `params`."""
    from execrl.models.engines.sampling import SamplingParams

    return SamplingParams(
        temperature=params.temperature,
        top_p=params.top_p,
        max_new_tokens=params.max_new_tokens,
        stop=params.stop,
        batch_size=params.batch_size,
        code_end=params.code_end,
        repeat_ngram=params.repeat_ngram,
        code_language=params.code_language,
        engine=engine,
    )


def _texts(completions: Sequence[Any], n: int) -> list[list[str]]:
    """Prompt-major completions as n texts per prompt."""
    return [[c.text for c in completions[i : i + n]] for i in range(0, len(completions), n)]


class ServerError(RuntimeError):
    """The completion server refused a request or answered something we cannot read."""


class OpenAIGenerator:
    """POST /completions (or /chat/completions with chat on) to an OpenAI-compatible server."""

    retries = 3  # connection failures and 5xx answers are retried, with a pause that doubles

    def __init__(self, url: str, model: str, *, chat: bool = False, timeout_s: float = 600) -> None:
        self.base = url.rstrip("/")
        if not self.base.endswith("/v1"):
            self.base += "/v1"
        self.model = model
        self.chat = chat
        self.timeout_s = timeout_s

    def generate(self, prompts: Sequence[str], n: int, params: GenerationParams) -> list[list[str]]:
        return [self._one(p, n, params) for p in prompts]

    def _one(self, prompt: str, n: int, params: GenerationParams) -> list[str]:
        body: dict[str, Any] = {
            "model": self.model,
            "n": n,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_new_tokens,
        }
        if self.chat:
            if params.reply_prefix:
                raise ServerError(
                    f"{self.base}: a chat server cannot be given the start of the reply "
                    "(--prompt evalplus); use --chat off, or a local model"
                )
            body["messages"] = [{"role": "user", "content": prompt}]
            answer = self._post("/chat/completions", body)
        else:
            body["prompt"] = prompt
            if params.stop:
                body["stop"] = list(params.stop)
            answer = self._post("/completions", body)
        try:
            choices = sorted(answer["choices"], key=lambda c: c.get("index", 0))
            texts = [c["message"]["content"] if self.chat else c["text"] for c in choices]
        except (KeyError, TypeError, AttributeError) as exc:
            raise ServerError(
                f"{self.base}: the answer has no choices[].{'message.content' if self.chat else 'text'} "
                f"({exc!r}); is this an OpenAI-compatible server?"
            ) from None
        if len(texts) != n or not all(isinstance(t, str) for t in texts):
            raise ServerError(f"{self.base}: asked for {n} completions, got {len(texts)}")
        return texts

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        data = json.dumps(body).encode()
        pause = 1.0
        for attempt in range(self.retries + 1):
            request = urllib.request.Request(
                self.base + path, data=data, headers={"Content-Type": "application/json"}
            )
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                    return json.loads(response.read())
            except urllib.error.HTTPError as exc:
                detail = exc.read()[:300].decode(errors="replace")
                if exc.code < 500 or attempt == self.retries:
                    raise ServerError(
                        f"{self.base}{path}: HTTP {exc.code}: {detail} (model {self.model!r})"
                    ) from None
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                if attempt == self.retries:
                    raise ServerError(
                        f"{self.base}{path}: no answer after {self.retries + 1} tries ({exc}); "
                        "is the server running?"
                    ) from None
            except json.JSONDecodeError:
                raise ServerError(f"{self.base}{path}: the answer is not JSON") from None
            time.sleep(pause)
            pause *= 2
        raise AssertionError("unreachable")
