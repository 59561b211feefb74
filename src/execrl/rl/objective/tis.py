"""Truncated importance sampling (TIS) between the rollout engine and the trainer.

An engine with its own kernels (vLLM) samples from mu, a slightly different distribution than
the trainer's pi_old over the same weights (other matmul orders, fused kernels, bf16 caches),
and an asynchronous run samples from weights some updates old. The policy-gradient estimate
needs samples from pi_old; each token's term is reweighted by pi_old / mu, truncated at a cap C
so that a rare token the engine over-sampled cannot blow up the gradient:

    w_t = min(exp(log pi_old(y_t) - log mu(y_t)), C)          (no gradient through w)

Yao, Liu, Zhang, et al. 2025, "Your Efficient RL Framework Secretly Brings You Off-Policy RL
Training" (the TIS correction), as verl applies it (`tis_imp_ratio_cap`) and slime
(`--use-tis`): the weight multiplies each token's policy-gradient loss; the PPO ratio itself
stays pi_theta / pi_old, with pi_old the trainer's own log-probabilities.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def tis_weights(
    trainer_logprobs: torch.Tensor,  # (B, T) log pi_old(y_t): the trainer's own forward
    engine_logprobs: torch.Tensor,  # (B, T) log mu(y_t): what the engine sampled with
    mask: torch.Tensor,  # (B, T) 1.0 on completion tokens, 0.0 on padding
    cap: float,  # C >= 1: the largest weight a token gets
) -> torch.Tensor:
    """(B, T) truncated importance weights min(pi_old / mu, C), 0 on padding; no gradient."""
    if cap < 1:
        raise ValueError(f"the truncated importance-sampling cap must be >= 1, got {cap}")
    log_ratio = (trainer_logprobs - engine_logprobs).detach()  # (B, T)
    # clamp the log first: exp of a large log-ratio on padding or a broken engine is inf
    ratio = torch.exp(log_ratio.clamp(max=torch.log(torch.tensor(cap)).item()))  # (B, T)
    return ratio * mask


@dataclass(frozen=True, slots=True)
class LogprobGap:
    """How far the engine's log-probabilities are from the trainer's, over real tokens."""

    mean: float  # mean |log pi_old - log mu| (engine/logprob_diff_mean)
    max: float  # max |log pi_old - log mu| (engine/logprob_diff_max)
    truncated: float  # fraction of tokens whose ratio pi_old / mu exceeded the cap


def logprob_gap(
    trainer_logprobs: torch.Tensor,  # (B, T)
    engine_logprobs: torch.Tensor,  # (B, T)
    mask: torch.Tensor,  # (B, T)
    cap: float,
) -> LogprobGap:
    real = mask.bool()  # (B, T)
    if not bool(real.any()):
        return LogprobGap(0.0, 0.0, 0.0)
    diff = (trainer_logprobs - engine_logprobs).detach()[real]  # (N,) over real tokens
    return LogprobGap(
        mean=float(diff.abs().mean()),
        max=float(diff.abs().max()),
        truncated=float((diff > torch.log(torch.tensor(cap))).float().mean()),
    )
