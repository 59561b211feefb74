"""Policy and value losses, and how per-token losses become one number. Pure functions.

Shapes: B sequences, T completion tokens (padded); mask (B, T) is 1 on tokens that count.
Every aggregator takes an optional `denominator`: under gradient accumulation and across
processes the caller passes the count of the *global* batch, so summing the micro-batch losses
(and all-reducing gradients with SUM) gives exactly the full-batch gradient.
"""

from __future__ import annotations

import torch


def clipped_surrogate(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's clipped objective (Schulman et al. 2017, eq. 7) with DAPO's decoupled clip range.

    DAPO (Yu et al. 2025, "clip-higher") raises eps_high above eps_low so unlikely tokens can gain
    probability. logp, old_logp, advantages (B, T) -> (per-token loss (B, T), clipped (B, T) bool:
    where the clipped term is the one in force, i.e. the gradient of that token is zero).
    """
    ratio = torch.exp(logp - old_logp)  # (B, T)
    unclipped = ratio * advantages  # (B, T)
    clipped = torch.clamp(ratio, 1 - eps_low, 1 + eps_high) * advantages  # (B, T)
    loss = -torch.minimum(unclipped, clipped)  # (B, T)
    return loss, clipped < unclipped


def clipped_value_loss(
    values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, clip: float = 0.2
) -> torch.Tensor:
    """PPO value loss with the old-value clip (as in OpenAI baselines / cleanrl): (B, T) each.

    0.5 * max((V - R)^2, (clip(V, V_old +- clip) - R)^2), per token.
    """
    v_clipped = old_values + torch.clamp(values - old_values, -clip, clip)  # (B, T)
    return 0.5 * torch.maximum((values - returns) ** 2, (v_clipped - returns) ** 2)


def token_mean(
    loss: torch.Tensor, mask: torch.Tensor, denominator: float | None = None
) -> torch.Tensor:
    """sum_{i,t} loss * mask / (number of tokens): every token weighs the same (DAPO, eq. 12)."""
    m = mask.float()
    return (loss * m).sum() / (m.sum().clamp(min=1) if denominator is None else denominator)


def seq_mean(
    loss: torch.Tensor, mask: torch.Tensor, denominator: float | None = None
) -> torch.Tensor:
    """mean_i (1/|o_i|) sum_t loss: every sequence weighs the same (GRPO, Shao et al. 2024, eq. 3).

    The 1/|o_i| favours long wrong answers over short ones (Dr. GRPO's length bias).
    """
    m = mask.float()
    per_seq = (loss * m).sum(1) / m.sum(1).clamp(min=1)  # (B,)
    has_tokens = (m.sum(1) > 0).float()  # (B,)
    return per_seq.sum() / (has_tokens.sum().clamp(min=1) if denominator is None else denominator)


def seq_mean_constant(
    loss: torch.Tensor, mask: torch.Tensor, normaliser: float, denominator: float | None = None
) -> torch.Tensor:
    """mean_i (1/L) sum_t loss with a constant L, the token budget (Dr. GRPO, Liu et al. 2025).

    denominator counts sequences (default: those with any valid token).
    """
    m = mask.float()
    n = (m.sum(1) > 0).float().sum().clamp(min=1) if denominator is None else denominator
    return (loss * m).sum() / (normaliser * n)


def entropy_from_logprobs(logp: torch.Tensor) -> torch.Tensor:
    """H(pi(. | s_t)) = -sum_v p log p, from normalised log-probabilities (B, T, V) -> (B, T)."""
    return -(logp.exp() * logp).sum(-1)
