"""SFT examples from JSONL: prompt/completion pairs or chat messages, tokenised with the loss
on the completion only (`models.loading.sft.sft_example`: prompt tokens are context, -100 labels).

A pair may carry `prompt_ids`, the prompt as token ids: then those ids are the context, not an
encoding of the text. Multi-turn contexts need it (`execrl eval --env self_correct
--corrections` writes such pairs): a conversation is built turn by turn, and encoding its text
in one piece merges tokens across turn boundaries, a context the model never sees in an episode.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from execrl.models.loading.sft import sft_example
from execrl.tasks.errors import TaskDataError
from execrl.tasks.sources import read_records


@dataclass(frozen=True, slots=True)
class Pair:
    prompt: str
    completion: str
    where: str  # file and line, for messages
    prompt_ids: tuple[int, ...] | None = None  # the context as token ids, used instead of prompt


@dataclass(frozen=True, slots=True)
class Examples:
    tokens: list[tuple[list[int], int]]  # (ids of prompt + completion + eos, prompt length)
    too_long: int  # examples over data.max_tokens, left out


def read_pairs(path: Path, tokenizer: Any) -> list[Pair]:
    """Each line's prompt and completion; a chat record becomes the chat template applied to
    the turns before its last (the assistant's), and that last turn. Errors name the line."""
    if not path.is_file():
        raise TaskDataError(f"data.train: no such file {path}")
    pairs = []
    for where, rec in read_records(path):
        if isinstance(rec.get("prompt"), str) and isinstance(rec.get("completion"), str):
            ids = _prompt_ids(where, rec, tokenizer) if "prompt_ids" in rec else None
            pairs.append(Pair(rec["prompt"], rec["completion"], where, ids))
        elif isinstance(rec.get("messages"), list):
            pairs.append(_chat_pair(where, rec["messages"], tokenizer))
        else:
            raise TaskDataError(
                f"{where}: an SFT example needs string 'prompt' and 'completion' fields, or "
                "'messages' (a list of {'role', 'content'} ending with the assistant's turn)"
            )
    return pairs


def _prompt_ids(where: str, rec: dict[str, Any], tokenizer: Any) -> tuple[int, ...]:
    ids, vocab = rec["prompt_ids"], len(tokenizer)
    ok = isinstance(ids, list) and ids and all(isinstance(i, int) for i in ids)
    if not ok or not all(0 <= i < vocab for i in ids):
        raise TaskDataError(
            f"{where}: 'prompt_ids' must be a non-empty list of token ids below this tokenizer's "
            f"vocabulary size {vocab}; ids are a tokenizer's own: train the model that wrote "
            "them, or drop 'prompt_ids' to encode 'prompt'"
        )
    return tuple(ids)


def _chat_pair(where: str, messages: list[Any], tokenizer: Any) -> Pair:
    ok = all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
        for m in messages
    )
    if not ok or len(messages) < 2 or messages[-1]["role"] != "assistant":
        raise TaskDataError(
            f"{where}: 'messages' must be {{'role', 'content'}} objects, at least two, the last "
            "the assistant's (the completion the loss is on)"
        )
    if not getattr(tokenizer, "chat_template", None):
        raise TaskDataError(
            f"{where}: chat messages need a tokenizer with a chat template; this model has "
            "none: write the example as a 'prompt'/'completion' pair"
        )
    prompt = tokenizer.apply_chat_template(
        messages[:-1], tokenize=False, add_generation_prompt=True
    )
    return Pair(prompt, messages[-1]["content"], where)


def tokenize(pairs: list[Pair], tokenizer: Any, max_tokens: int) -> Examples:
    tokens, too_long = [], 0
    for pair in pairs:
        if not pair.completion:
            raise TaskDataError(f"{pair.where}: the completion is empty; nothing to learn")
        ids, n_prompt = sft_example(tokenizer, pair.prompt, pair.completion)
        if pair.prompt_ids is not None:
            ids, n_prompt = [*pair.prompt_ids, *ids[n_prompt:]], len(pair.prompt_ids)
        if len(ids) > max_tokens:
            too_long += 1
            continue
        tokens.append((ids, n_prompt))
    if not tokens:
        raise TaskDataError(
            f"no SFT example fits in data.max_tokens = {max_tokens} ({too_long} are longer)"
        )
    return Examples(tokens, too_long)
