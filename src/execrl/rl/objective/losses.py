"""Policy and value losses, and how per-token losses become one number. Pure functions.

Shapes: B sequences, T completion tokens (padded); mask (B, T) is 1 on tokens that count.
Every aggregator takes an optional `denominator`: under gradient accumulation and across
processes the caller passes the count of the *global* batch, so summing the micro-batch losses
(and all-reducing gradients with SUM) gives exactly the full-batch gradient.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from execrl.rl.objective.tis import tis_weights

if TYPE_CHECKING:
    from execrl.rl.objective.logprobs import SequenceBatch


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


@dataclass(frozen=True, slots=True)
class Batch:
    """One micro-batch of the update, every tensor fixed while the policy changes
    (torchtune's GRPOTrajectory). B sequences, T completion tokens (right-padded)."""

    sequences: SequenceBatch  # prompt + completion ids (B, P + T), shared prompts found
    # (B, T) behaviour log pi_old(token), recorded while sampling; None: the update's own
    # forward, detached (one epoch on current rollouts, `LearnerSettings.old_from_update`)
    old_logp: torch.Tensor | None
    advantages: torch.Tensor  # (B, T)
    mask: torch.Tensor  # (B, T) float: 1 on the tokens that count (`groups.counts_in_loss`)
    ref_logp: torch.Tensor | None = None  # (B, T) reference model, when rl.kl_coef > 0
    old_values: torch.Tensor | None = None  # (B, T) PPO critic before the update
    value_targets: torch.Tensor | None = None  # (B, T) PPO returns (GAE + old values)
    # (B, T) log mu(token) of an engine with its own kernels (vLLM); old_logp is then the
    # trainer's own forward, and each token's surrogate is weighted by min(pi_old / mu, cap)
    engine_logp: torch.Tensor | None = None
    tasks: torch.Tensor | None = None  # (B,) each row's task index (per-source KL in the log)
    # (B, T) a KL coefficient of each token's own, added to LossSettings.kl_coef: an episode's
    # held turns (credit.held_kl_coef); None: none
    kl_coef_tokens: torch.Tensor | None = None


@dataclass(frozen=True, slots=True)
class LossSettings:
    clip_low: float
    clip_high: float
    kl_coef: float  # beta, when the KL penalty is in the loss (GRPO); 0 otherwise
    entropy_coef: float
    vf_coef: float
    value_clip: float
    tis_cap: float = 2.0  # truncated importance sampling cap, with an engine's log-probs


@dataclass(frozen=True, slots=True)
class LossParts:
    total: torch.Tensor  # scalar: what is back-propagated
    value_loss: torch.Tensor  # scalar (aggregated like the policy loss); 0 without a critic
    clipped: torch.Tensor  # (B, T) bool: the clipped term is in force
    kl: torch.Tensor  # (B, T) KL estimate to the reference (0 without one), detached


def policy_loss(
    batch: Batch,
    logp: torch.Tensor,
    entropy: torch.Tensor,
    values: torch.Tensor | None,
    kl_estimator: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None,
    aggregate: Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor],
    denominator: float,
    s: LossSettings,
) -> LossParts:
    """The loss of one micro-batch: PPO-clip surrogate (DAPO clip-higher), plus the KL penalty
    in the loss (GRPO, Shao et al. 2024, eq. 3), minus the entropy bonus, plus the clipped
    value loss (PPO). logp, entropy (B, T) from the current policy; values (B, T) or None."""
    loss_tok, clipped = clipped_surrogate(
        logp, batch.old_logp, batch.advantages, s.clip_low, s.clip_high
    )  # (B, T)
    if batch.engine_logp is not None:  # the samples came from mu, not pi_old (`rl.objective.tis`)
        loss_tok = loss_tok * tis_weights(batch.old_logp, batch.engine_logp, batch.mask, s.tis_cap)
    kl_tok = torch.zeros_like(loss_tok)  # (B, T)
    if kl_estimator is not None and batch.ref_logp is not None:
        kl_tok = kl_estimator(logp, batch.ref_logp)
        if s.kl_coef:  # KL in the reward (PPO, REINFORCE++) is measured here, not penalised
            loss_tok = loss_tok + s.kl_coef * kl_tok
        if batch.kl_coef_tokens is not None:
            loss_tok = loss_tok + batch.kl_coef_tokens * kl_tok
    if s.entropy_coef:
        loss_tok = loss_tok - s.entropy_coef * entropy
    total = aggregate(loss_tok, batch.mask, denominator)
    value_loss = torch.zeros((), device=logp.device)
    if values is not None and batch.old_values is not None and batch.value_targets is not None:
        v_tok = clipped_value_loss(values, batch.old_values, batch.value_targets, s.value_clip)
        value_loss = aggregate(v_tok, batch.mask, denominator)
        total = total + s.vf_coef * value_loss
    return LossParts(total, value_loss.detach(), clipped, kl_tok.detach())
