"""Turning a task prompt into the text a model continues: its chat template, or the raw prompt."""

from __future__ import annotations

from typing import Any

# Stands for the reply while the template renders it: the text before it is the prompt
_REPLY_MARK = "\x00execrl-reply\x00"


def format_prompt(
    tokenizer: Any, prompt: str, *, chat: bool | None = None, system: str = "",
    reply_prefix: str = "",
) -> str:  # fmt: skip
    """The model's input for one prompt.

    chat=None uses the chat template when the tokenizer has one (instruct models) and the raw
    prompt otherwise (base models and the embedded default, which continue code).
    `reply_prefix` (chat only): the model's reply starts with it, as the template lays out an
    assistant turn (rendered with a mark in the reply and cut there, so a template that writes
    something of its own into an assistant turn keeps it).
    """
    if not uses_chat_template(tokenizer, chat):
        return prompt
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError(
            f"model.chat = true but the tokenizer {getattr(tokenizer, 'name_or_path', '')!r} "
            "has no chat template; set model.chat = false to use raw prompts"
        )
    messages = ([{"role": "system", "content": system}] if system else []) + [
        {"role": "user", "content": prompt}
    ]
    if not reply_prefix:
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    reply = {"role": "assistant", "content": reply_prefix + _REPLY_MARK}
    text = tokenizer.apply_chat_template([*messages, reply], tokenize=False)
    if _REPLY_MARK not in text:
        raise ValueError(
            f"the chat template of {getattr(tokenizer, 'name_or_path', '')!r} drops the "
            "assistant's reply; this prompt style needs one that keeps it (or --chat off)"
        )
    return text.split(_REPLY_MARK)[0]


def uses_chat_template(tokenizer: Any, chat: bool | None) -> bool:
    return bool(getattr(tokenizer, "chat_template", None)) if chat is None else chat


def chat_wanted(mode: str) -> bool | None:
    """A `chat` setting ("auto", "on", "off": `model.chat`, `--chat`, a saved spec's) as
    `uses_chat_template` and `format_prompt` take it: None is auto, the tokenizer decides."""
    return {"auto": None, "on": True, "off": False}[mode]
