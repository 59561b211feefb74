"""KL(pi || pi_ref) per token from samples of pi: the k1, k2, k3 estimators.

John Schulman, "Approximating KL Divergence" (2020). With log r = log pi_ref - log pi on tokens
sampled from pi:  k1 = -log r (unbiased, high variance, can be negative);  k2 = (log r)^2 / 2
(biased, low variance; its gradient is that of the true KL);  k3 = (r - 1) - log r (unbiased,
always >= 0; GRPO's choice, Shao et al. 2024 eq. 4). All take logp, ref_logp (B, T) -> (B, T).

In the reward (PPO/REINFORCE++ style) the estimate is detached and subtracted from the token
rewards; in the loss (GRPO style) it is added to the per-token loss with its gradient.
"""

from __future__ import annotations

import torch


def k1(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    return logp - ref_logp  # (B, T)


def k2(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    return 0.5 * (logp - ref_logp) ** 2  # (B, T)


def k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    log_r = ref_logp - logp  # (B, T)
    # expm1 keeps precision when the policies are close (r - 1 is tiny).
    return torch.expm1(log_r) - log_r


ESTIMATORS = {"k1": k1, "k2": k2, "k3": k3}
