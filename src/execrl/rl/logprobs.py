"""Teacher-forced log-probabilities, entropies and values of completions under a model.

A batch lays each sequence out as [left padding | prompt | completion | right padding], so every
completion starts at column P (the widest prompt) and the logits of completion token t sit at
column P + t - 1. Positions count real tokens only, as in generation, so the numbers match the
behaviour log-probabilities that sampling recorded.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from execrl.rl.losses import entropy_from_logits


@dataclass(frozen=True, slots=True)
class SequenceBatch:
    input_ids: torch.Tensor  # (B, P + T) long
    attention_mask: torch.Tensor  # (B, P + T) long
    position_ids: torch.Tensor  # (B, P + T) long
    token_mask: torch.Tensor  # (B, T) float: 1 on real completion tokens
    prompt_width: int  # P

    @property
    def completion_ids(self) -> torch.Tensor:
        return self.input_ids[:, self.prompt_width :]  # (B, T)

    def to(self, device: torch.device | str) -> SequenceBatch:
        return SequenceBatch(
            self.input_ids.to(device),
            self.attention_mask.to(device),
            self.position_ids.to(device),
            self.token_mask.to(device),
            self.prompt_width,
        )


def collate(
    prompts: Sequence[torch.Tensor], completions: Sequence[torch.Tensor], pad_id: int
) -> SequenceBatch:
    """prompts[i] (P_i,), completions[i] (T_i,) -> SequenceBatch."""
    p = max(len(x) for x in prompts)
    t = max(1, max(len(x) for x in completions))
    ids = torch.full((len(prompts), p + t), pad_id, dtype=torch.long)
    attention = torch.zeros((len(prompts), p + t), dtype=torch.long)
    token_mask = torch.zeros((len(prompts), t))
    for i, (prompt, completion) in enumerate(zip(prompts, completions, strict=True)):
        ids[i, p - len(prompt) : p] = prompt
        ids[i, p : p + len(completion)] = completion
        attention[i, p - len(prompt) : p + len(completion)] = 1
        token_mask[i, : len(completion)] = 1
    positions = (attention.cumsum(1) - 1).clamp(min=0)
    return SequenceBatch(ids, attention, positions, token_mask, p)


@dataclass(frozen=True, slots=True)
class TokenStats:
    logp: torch.Tensor  # (B, T) log pi(token_t)
    entropy: torch.Tensor | None  # (B, T), when asked for
    hidden: torch.Tensor | None  # (B, T, H) last hidden state before each token, when asked for


def token_stats(
    model,
    batch: SequenceBatch,
    temperature: float = 1.0,
    *,
    entropy: bool = False,
    hidden: bool = False,
    disable_adapter: bool = False,
) -> TokenStats:
    """Forward pass; the logits are divided by the sampling temperature, as sampling did."""
    scope = model.disable_adapter() if disable_adapter else contextlib.nullcontext()
    with scope:
        out = model(
            input_ids=batch.input_ids,
            attention_mask=batch.attention_mask,
            position_ids=batch.position_ids,
            output_hidden_states=hidden,
        )
    p, t = batch.prompt_width, batch.token_mask.shape[1]
    logits = out.logits[:, p - 1 : p + t - 1].float()  # (B, T, V)
    if temperature > 0:
        logits = logits / temperature
    logp = (
        torch.log_softmax(logits, dim=-1).gather(-1, batch.completion_ids.unsqueeze(-1)).squeeze(-1)
    )
    return TokenStats(
        logp=logp,
        entropy=entropy_from_logits(logits) if entropy else None,
        hidden=out.hidden_states[-1][:, p - 1 : p + t - 1] if hidden else None,
    )
