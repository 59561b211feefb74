"""Each algorithm as a small named choice made once at set-up: its advantage and aggregation.

The advantage functions here adapt the pure estimators of `rl.advantages` to one signature,
(AdvantageInputs) -> advantages (B, T); nothing here does math of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch

from execrl.rl import advantages as A
from execrl.rl import losses


@dataclass(frozen=True, slots=True)
class AdvantageInputs:
    scores: torch.Tensor  # (B,) outcome rewards, prompt-major groups of group_size
    valid: torch.Tensor  # (B,) bool: reward not masked
    token_rewards: (
        torch.Tensor
    )  # (B, T): outcome (or token credit) on tokens, minus KL if in reward
    mask: torch.Tensor  # (B, T) float: real completion tokens
    values: torch.Tensor | None  # (B, T) PPO value estimates
    group_size: int
    returns_stats: tuple[torch.Tensor, torch.Tensor] | None = None  # REINFORCE++, global batch


def _outcome(estimator: Callable, x: AdvantageInputs) -> tuple[torch.Tensor, None]:
    return estimator(x.scores, x.group_size, x.valid)[:, None] * x.mask, None  # (B, T)


def _reinforce_pp(x: AdvantageInputs) -> tuple[torch.Tensor, None]:
    return A.reinforce_pp(x.token_rewards, x.mask, stats=x.returns_stats), None


def _ppo(gamma: float, lam: float, x: AdvantageInputs) -> tuple[torch.Tensor, torch.Tensor]:
    return A.gae(x.token_rewards, x.values, x.mask, gamma, lam)


def advantage_fn(algorithm: str, gamma: float = 1.0, lam: float = 0.95) -> Callable:
    """(AdvantageInputs) -> (advantages (B, T), value targets (B, T) or None)."""
    return {
        "grpo": partial(_outcome, A.grpo),
        "dr_grpo": partial(_outcome, A.dr_grpo),
        "rloo": partial(_outcome, A.rloo),
        "reinforce_pp": _reinforce_pp,
        "ppo": partial(_ppo, gamma, lam),
    }[algorithm]


def default_aggregation(algorithm: str) -> str:
    # Dr. GRPO's fix is the pair (no std, constant normaliser); the others use DAPO's token mean.
    return "seq_mean_constant" if algorithm == "dr_grpo" else "token_mean"


def aggregator(name: str, max_new_tokens: int) -> Callable:
    """(loss (B, T), mask (B, T), denominator) -> scalar."""
    if name == "seq_mean_constant":
        return lambda loss, mask, d: losses.seq_mean_constant(loss, mask, max_new_tokens, d)
    return {"token_mean": losses.token_mean, "seq_mean": losses.seq_mean}[name]


def counts_tokens(name: str) -> bool:
    """Whether the aggregator's global denominator counts tokens (else sequences)."""
    return name == "token_mean"
