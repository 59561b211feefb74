"""Token-exact trajectories: the ids the model was given and produced, turn by turn.

The policy's tokens are kept exactly as the engine produced them (never decoded and
re-encoded: re-tokenisation drift silently corrupts log-probabilities, the field's most reported
multi-turn bug). An environment turn is appended as token ids: with a chat template, the
conversation is re-rendered with the new message and only the new text is encoded; the check is
that the re-rendering starts with the text of every id so far (the template is append-only) and
that the new ids decode to the new text. A template that rewrites earlier turns (one that drops
past reasoning, say) is refused with an error naming it. Without a chat template (base models,
the embedded default) the conversation is plain text and a turn's `Observation.raw` is appended.

Environment tokens (prompt, feedback, tool output, a template's turn markers) have loss mask 0
and log-probability 0; the trainer must use neither on them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from execrl.rl.episodes.env import Observation


class NotAppendOnly(ValueError):
    """The chat template re-renders earlier turns differently once a turn is added."""


@dataclass(frozen=True, slots=True)
class Trajectory:
    """One episode as the trainer would learn from it. All per-token lists have length L."""

    token_ids: tuple[int, ...]  # (L,) the whole conversation
    loss_mask: tuple[int, ...]  # (L,) 1 on the policy's tokens, 0 on the environment's
    logprobs: tuple[float, ...]  # (L,) behaviour log pi on policy tokens, 0.0 elsewhere
    turn_spans: tuple[tuple[int, int], ...]  # [start, end) of each policy turn
    turn_rewards: tuple[float, ...]  # one per policy turn
    prompt_length: int  # tokens of the first observation

    @property
    def episode_return(self) -> float:
        return sum(self.turn_rewards)


@dataclass
class Conversation:
    """Builds a `Trajectory` as the episode runs: `start`, then `add_policy` and `add_env` in
    turn order; `ids` is what the model is given for its next turn."""

    tokenizer: Any
    chat: bool  # render through the tokenizer's chat template
    ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    spans: list[tuple[int, int]] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    messages: list[dict[str, str]] = field(default_factory=list)
    text: str = ""  # chat: the text of `ids`, as the template renders it
    prompt_length: int = 0
    # first observations already rendered and encoded, shared by the conversations of one
    # source (a group's episodes start alike; a task comes back step after step): an encode per
    # task, not per episode
    starts: dict[Observation, tuple[str, list[int]]] | None = None

    def start(self, observation: Observation) -> list[int]:
        if self.chat:
            self.messages = [{"role": observation.role, "content": observation.text}]
        known = None if self.starts is None else self.starts.get(observation)
        self.text, first = known or self._first(observation)
        if self.starts is not None and known is None:
            self.starts[observation] = (self.text, first)
        self._append(first, None)
        self.prompt_length = len(first)
        return list(self.ids)

    def _first(self, observation: Observation) -> tuple[str, list[int]]:
        """The first observation's text (chat: as the template renders it) and its ids."""
        if self.chat:
            text = self._render(add_generation_prompt=True)
            return text, self.tokenizer.encode(text, add_special_tokens=False)
        return "", self.tokenizer.encode(observation.raw)

    def add_policy(self, token_ids: Sequence[int], logprobs: Sequence[float], text: str) -> None:
        """The model's turn: its ids verbatim, `text` its decoded message (no special tokens)."""
        if len(token_ids) != len(logprobs):
            raise ValueError(f"{len(token_ids)} policy tokens but {len(logprobs)} log-probs")
        start = len(self.ids)
        self._append(list(token_ids), list(logprobs))
        self.spans.append((start, len(self.ids)))
        if self.chat:
            self.messages.append({"role": "assistant", "content": text})
            self.text += self.tokenizer.decode(list(token_ids), skip_special_tokens=False)

    def add_env(self, observation: Observation) -> list[int]:
        """An environment turn appended as token ids; the ids the model is given next."""
        if self.chat:
            self.messages.append({"role": observation.role, "content": observation.text})
            rendered = self._render(add_generation_prompt=True)
            if not rendered.startswith(self.text):
                at = next(
                    (
                        i
                        for i, (a, b) in enumerate(zip(rendered, self.text, strict=False))
                        if a != b
                    ),
                    min(len(rendered), len(self.text)),
                )
                raise NotAppendOnly(
                    f"the chat template of {self._name()} is not append-only: re-rendering the "
                    f"conversation after turn {len(self.spans)} changes earlier text at character "
                    f"{at} (was {self.text[at : at + 40]!r}, now {rendered[at : at + 40]!r}). "
                    "Multi-turn episodes need a template that renders past turns unchanged; "
                    "use another template (tokenizer.chat_template) or chat off"
                )
            new_text = rendered[len(self.text) :]
            self.text = rendered
        else:
            new_text = observation.raw
        new_ids = self.tokenizer.encode(new_text, add_special_tokens=False)
        back = self.tokenizer.decode(new_ids, skip_special_tokens=False)
        if back != new_text:
            raise NotAppendOnly(
                f"the tokenizer of {self._name()} does not encode the environment's turn "
                f"{len(self.spans)} reversibly ({new_text[:40]!r} decodes back as {back[:40]!r}); "
                "the trajectory would not be the text the model was shown"
            )
        self._append(new_ids, None)
        return list(self.ids)

    def add_reward(self, reward: float) -> None:
        self.rewards.append(reward)

    def trajectory(self) -> Trajectory:
        if len(self.rewards) != len(self.spans):
            raise ValueError(f"{len(self.spans)} policy turns but {len(self.rewards)} rewards")
        return Trajectory(
            tuple(self.ids),
            tuple(self.mask),
            tuple(self.logprobs),
            tuple(self.spans),
            tuple(self.rewards),
            self.prompt_length,
        )

    def _append(self, ids: list[int], logprobs: list[float] | None) -> None:
        self.ids.extend(ids)
        self.mask.extend([0 if logprobs is None else 1] * len(ids))
        self.logprobs.extend([0.0] * len(ids) if logprobs is None else logprobs)

    def _render(self, add_generation_prompt: bool) -> str:
        try:
            return self.tokenizer.apply_chat_template(
                self.messages, tokenize=False, add_generation_prompt=add_generation_prompt
            )
        except Exception as exc:  # noqa: BLE001 - jinja raises anything a template raises
            role = self.messages[-1]["role"]
            raise ValueError(
                f"the chat template of {self._name()} cannot render the conversation after a "
                f"{role!r} turn ({type(exc).__name__}: {exc}); templates without a tool role "
                'cannot run env = "tool" with chat on: use chat off or another template'
            ) from exc

    def _name(self) -> str:
        return repr(getattr(self.tokenizer, "name_or_path", "") or type(self.tokenizer).__name__)


@dataclass(frozen=True, slots=True)
class TextPrompt:
    """What a text-only model is given for its next turn: the raw text so far (a completion
    endpoint) and the messages so far (a chat endpoint)."""

    raw: str
    messages: list[dict[str, str]]


@dataclass
class TextConversation:
    """The turns of an episode with a text-only model (an OpenAI-compatible server), as texts:
    a server's tokens are not ours, so there is no trajectory to train on."""

    raw: str = ""
    messages: list[dict[str, str]] = field(default_factory=list)

    def start(self, observation: Observation) -> TextPrompt:
        self.raw = observation.raw
        self.messages = [{"role": observation.role, "content": observation.text}]
        return TextPrompt(self.raw, list(self.messages))

    def add_policy(self, token_ids: Sequence[int], logprobs: Sequence[float], text: str) -> None:
        self.raw += text
        self.messages.append({"role": "assistant", "content": text})

    def add_env(self, observation: Observation) -> TextPrompt:
        self.raw += observation.raw
        self.messages.append({"role": observation.role, "content": observation.text})
        return TextPrompt(self.raw, list(self.messages))

    def add_reward(self, reward: float) -> None:
        return None

    def trajectory(self) -> None:
        return None


def token_offsets(tokenizer: Any, token_ids: list[int], text: str) -> tuple[tuple[int, int], ...]:
    """(start, end) characters of `text` that each generated token wrote: the decoded length
    before and after it. Tokens past the end of `text` (a stop sequence cut from it) get an
    empty span at the end. Decoding the ids, not re-tokenizing the text, keeps exactly one
    span per token: a re-tokenization can split the text differently."""
    spans = []
    before = 0
    for i in range(len(token_ids)):
        after = min(len(text), len(tokenizer.decode(token_ids[: i + 1])))
        after = max(after, before)  # a partial UTF-8 character decodes short: no negative span
        spans.append((before, after))
        before = after
    return tuple(spans)
