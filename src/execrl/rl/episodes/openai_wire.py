"""The OpenAI wire format of the policy server: a call's JSON in (`parse_call`), an answer's
JSON out (`answer_json`, `stream_chunks`), a recording as JSON (`recording_json`).

Not served (`BadRequest` says so): `n` > 1 (make n calls: each is one sample of the episode),
`tools` and tool calls (describe the tool syntax in the messages), non-text content parts.
"""

from __future__ import annotations

import re
import time
import uuid
from dataclasses import dataclass, replace
from typing import Any

from execrl.models.engines.sampling import Completion, SamplingParams
from execrl.rl.episodes.recorder import CallRecord, Ticket

_EPISODE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_FINISH = {"eos": "stop", "stop": "stop", "length": "length"}


class BadRequest(ValueError):
    """A call the server cannot serve as asked; the message goes back to the harness (400)."""


@dataclass(frozen=True, slots=True)
class CallRequest:
    """One parsed call."""

    chat: bool  # /v1/chat/completions (else /v1/completions)
    text: str  # the conversation as the model reads it (rendered chat, or the raw prompt)
    raw: bool  # `text` is raw text, not a chat template's rendering
    params: SamplingParams
    episode_id: str  # "" when the call named none
    stream: bool
    stream_usage: bool = False  # stream_options.include_usage: a last chunk with the usage


def parse_call(route: str, body: dict[str, Any], path_episode: str, header_episode: str,
               tokenizer: Any, chat_template: bool, sampling: SamplingParams,
               fixed_sampling: bool) -> CallRequest:  # fmt: skip
    """A call's JSON body as a `CallRequest`; `BadRequest` says what is wrong with it."""
    chat = route == "/v1/chat/completions"
    if body.get("tools") or body.get("functions"):
        raise BadRequest(
            "tool calls are not served by execrl serve-policy: describe the tools and their "
            "call syntax in the messages and parse the model's text"
        )
    if body.get("n", 1) != 1:
        raise BadRequest("n must be 1 (each call is one sample of the episode): make n calls")
    if chat:
        text, raw = _render(body.get("messages"), tokenizer, chat_template)
    else:
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1:
            prompt = prompt[0]
        if not isinstance(prompt, str):
            raise BadRequest("`prompt` must be one string")
        text, raw = prompt, True
    episode = path_episode or header_episode or _str(body.get("user"), "user")
    if episode and not _EPISODE_ID.match(episode):
        raise BadRequest(f"episode id {episode[:40]!r}: use 1-128 of A-Z a-z 0-9 . _ : -")
    options = body.get("stream_options") or {}
    usage = isinstance(options, dict) and bool(options.get("include_usage"))
    return CallRequest(chat, text, raw, _params(body, sampling, fixed_sampling), episode, bool(body.get("stream")),
                       usage)  # fmt: skip


def _render(messages: Any, tokenizer: Any, chat_template: bool) -> tuple[str, bool]:
    if not isinstance(messages, list) or not messages:
        raise BadRequest("`messages` must be a non-empty list of {role, content}")
    clean = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise BadRequest(f"messages[{i}] must be an object with a string `role`")
        if m.get("tool_calls") or m.get("function_call"):
            raise BadRequest(f"messages[{i}]: tool calls are not served by execrl serve-policy")
        clean.append({"role": m["role"], "content": _content(m.get("content"), i)})
    if not chat_template:
        # no template: the conversation is its contents in order, as a base model reads it
        return "".join(m["content"] for m in clean), True
    try:
        rendered = tokenizer.apply_chat_template(clean, tokenize=False, add_generation_prompt=True)
    except Exception as exc:  # noqa: BLE001 - jinja raises anything a template raises
        raise BadRequest(f"the model's chat template cannot render these messages: {exc}") from None
    return rendered, False


def _params(body: dict[str, Any], base: SamplingParams, fixed_sampling: bool) -> SamplingParams:
    stop = body.get("stop") or ()
    stop = (stop,) if isinstance(stop, str) else stop
    if not isinstance(stop, list | tuple) or not all(isinstance(s, str) for s in stop):
        raise BadRequest("`stop` must be a string or a list of strings")
    wanted = body.get("max_completion_tokens", body.get("max_tokens"))
    if wanted is not None and (not isinstance(wanted, int) or wanted < 1):
        raise BadRequest("`max_tokens` must be a positive integer")
    budget = base.max_new_tokens if wanted is None else min(wanted, base.max_new_tokens)
    temperature, top_p = base.temperature, base.top_p
    if not fixed_sampling:
        temperature = _number(body.get("temperature", temperature), "temperature")
        top_p = _number(body.get("top_p", top_p), "top_p")
    try:
        return replace(base, temperature=temperature, top_p=top_p, max_new_tokens=budget,
                       stop=tuple(stop))  # fmt: skip
    except ValueError as exc:
        raise BadRequest(str(exc).replace("sampling.", "")) from None


def _str(value: Any, name: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise BadRequest(f"`{name}` must be a string")
    return value


def _number(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadRequest(f"`{name}` must be a number")
    return float(value)


def _content(content: Any, index: int) -> str:
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if isinstance(content, list) and all(
        isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
        for p in content
    ):
        return "".join(p["text"] for p in content)
    raise BadRequest(f"messages[{index}].content must be a string or a list of text parts")


def answer_json(model_name: str, request: CallRequest, done: Completion,
                record: CallRecord | None, ticket: Ticket | None) -> dict[str, Any]:  # fmt: skip
    """The OpenAI answer to a call, with an `execrl` object when it was recorded."""
    prompt_tokens = len(done.prompt_ids)
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": done.n_tokens,
             "total_tokens": prompt_tokens + done.n_tokens}  # fmt: skip
    finish = _FINISH.get(done.finish, "stop")
    if request.chat:
        message = {"role": "assistant", "content": done.text}
        choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish}
        kind, prefix = "chat.completion", "chatcmpl"
    else:
        choice = {"index": 0, "text": done.text, "finish_reason": finish}
        kind, prefix = "text_completion", "cmpl"
    choice["logprobs"] = None
    answer: dict[str, Any] = {
        "id": f"{prefix}-{uuid.uuid4().hex}", "object": kind, "created": int(time.time()),
        "model": model_name, "choices": [choice], "usage": usage,
    }  # fmt: skip
    if record is not None and ticket is not None:
        answer["execrl"] = {"episode_id": ticket.episode_id, "call": record.call,
                            "segment": record.segment, "extends": record.how}  # fmt: skip
    return answer


def stream_chunks(request: CallRequest, answer: dict[str, Any]) -> list[dict[str, Any]]:
    """The answer as OpenAI stream chunks: the whole content, then the finish reason (then the
    usage, with no choice, when the call asked for it)."""
    choice = answer["choices"][0]
    head = {k: answer[k] for k in ("id", "created", "model")}
    if request.chat:
        head["object"] = "chat.completion.chunk"
        content = {"role": "assistant", "content": choice["message"]["content"]}
        chunks = [
            {**head, "choices": [{"index": 0, "delta": content, "finish_reason": None}]},
            {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]},
        ]  # fmt: skip
    else:
        head["object"] = "text_completion"
        chunks = [
            {**head, "choices": [{"index": 0, "text": choice["text"], "finish_reason": None}]},
            {**head, "choices": [{"index": 0, "text": "", "finish_reason": choice["finish_reason"]}]},
        ]  # fmt: skip
    if request.stream_usage:
        chunks.append({**head, "choices": [], "usage": answer["usage"]})
    return chunks


def recording_json(recording: Any) -> dict[str, Any]:
    """An episode's recording as JSON: every segment's ids, mask, log-probs and call spans."""
    return {
        "episode_id": recording.episode_id,
        "calls": len(recording.calls),
        "segments": [
            {
                "token_ids": s.ids,
                "loss_mask": s.mask,
                "logprobs": s.logprobs,
                "turn_spans": s.spans,
                "calls": s.calls,
                "prompt_length": s.prompt_length,
            }
            for s in recording.segments
            if s.calls
        ],  # fmt: skip
    }
