"""Advantage estimators: one pure function each, the paper named, shapes in comments.

B = sequences in the batch, laid out prompt-major: group g (one prompt) owns rows [g*G, (g+1)*G);
T = completion tokens (padded); `valid` (B,) marks samples allowed into statistics (a sample the
reward masked, e.g. a sandbox infrastructure error, is neither learned from nor counted).

Departures from the papers, on purpose:
- GRPO's std is the unbiased sample std over the valid members of a group (as TRL computes it),
  and groups with fewer than two valid members get advantage 0.
- RLOO's baseline leaves out only valid members; a group with one valid member gets advantage 0.
"""

from __future__ import annotations

import torch


def _groups(x: torch.Tensor, group_size: int) -> torch.Tensor:
    if x.ndim != 1 or x.numel() % group_size:
        raise ValueError(
            f"expected (B,) with B divisible by group size {group_size}, got {tuple(x.shape)}"
        )
    return x.view(-1, group_size)  # (N, G)


def _valid(rewards: torch.Tensor, valid: torch.Tensor | None) -> torch.Tensor:
    return torch.ones_like(rewards, dtype=torch.bool) if valid is None else valid.bool()


def grpo(
    rewards: torch.Tensor, group_size: int, valid: torch.Tensor | None = None, eps: float = 1e-4
) -> torch.Tensor:
    """GRPO outcome advantages (Shao et al. 2024, DeepSeekMath, sec. 4.1.2): (r - mean_g) / (std_g + eps).

    rewards (B,) -> advantages (B,), constant over a sequence's tokens.
    """
    r = _groups(rewards.float(), group_size)  # (N, G)
    v = _groups(_valid(rewards, valid), group_size).float()  # (N, G)
    count = v.sum(1, keepdim=True)  # (N, 1)
    mean = (r * v).sum(1, keepdim=True) / count.clamp(min=1)  # (N, 1)
    var = (((r - mean) * v) ** 2).sum(1, keepdim=True) / (count - 1).clamp(min=1)  # (N, 1)
    adv = (r - mean) / (var.sqrt() + eps) * v * (count > 1)  # (N, G)
    return adv.view(-1)


def dr_grpo(
    rewards: torch.Tensor, group_size: int, valid: torch.Tensor | None = None
) -> torch.Tensor:
    """Dr. GRPO (Liu et al. 2025, "Understanding R1-Zero-Like Training"): r - mean_g, no std.

    Dividing by the std up-weights groups that are nearly all right or all wrong; Dr. GRPO drops
    it (and pairs it with the constant-normaliser aggregation `losses.seq_mean_constant`).
    rewards (B,) -> advantages (B,).
    """
    r = _groups(rewards.float(), group_size)  # (N, G)
    v = _groups(_valid(rewards, valid), group_size).float()  # (N, G)
    count = v.sum(1, keepdim=True)  # (N, 1)
    mean = (r * v).sum(1, keepdim=True) / count.clamp(min=1)  # (N, 1)
    return ((r - mean) * v * (count > 1)).view(-1)


def rloo(rewards: torch.Tensor, group_size: int, valid: torch.Tensor | None = None) -> torch.Tensor:
    """RLOO (Ahmadian et al. 2024, "Back to Basics"; Kool et al. 2019): r_i - mean_{j != i} r_j.

    rewards (B,) -> advantages (B,).
    """
    r = _groups(rewards.float(), group_size)  # (N, G)
    v = _groups(_valid(rewards, valid), group_size).float()  # (N, G)
    count = v.sum(1, keepdim=True)  # (N, 1)
    others = ((r * v).sum(1, keepdim=True) - r * v) / (count - 1).clamp(min=1)  # (N, G)
    return ((r - others) * v * (count > 1)).view(-1)


def reinforce_pp(
    token_rewards: torch.Tensor,
    mask: torch.Tensor,
    eps: float = 1e-8,
    stats: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> torch.Tensor:
    """REINFORCE++ (Hu et al. 2025): undiscounted return-to-go, normalised over the global batch.

    token_rewards (B, T): the outcome reward on each sequence's last token plus any per-token
    terms (token credit, -beta * KL when the KL is in the reward); mask (B, T) marks the tokens
    that count. Returns advantages (B, T), zero where mask is 0. `stats` = (mean, std) of the
    returns over the whole global batch, when the caller holds only part of it (several
    processes, `reinforce_pp_moments`); by default they come from this batch
    (`reinforce_pp_stats`).
    """
    returns = return_to_go(token_rewards, mask)  # (B, T)
    mean, std = reinforce_pp_stats(returns, mask) if stats is None else stats
    return (returns - mean) / (std + eps) * mask


def reinforce_pp_stats(
    returns: torch.Tensor, mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Masked mean and (population) std of returns (B, T) over the valid tokens, scalars."""
    m = mask.float()
    n = m.sum().clamp(min=1)
    mean = (returns * m).sum() / n
    var = (((returns - mean) * m) ** 2).sum() / n
    return mean, var.sqrt()


def reinforce_pp_moments(token_rewards: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(3,) the sums behind REINFORCE++'s global statistics over this batch's masked tokens:
    sum G_t, sum G_t^2 and the count, G the return-to-go. Summed over the processes that each
    hold part of the global batch, `moments_stats` turns them into the whole batch's mean, std.
    token_rewards (B, T), mask (B, T)."""
    returns = return_to_go(token_rewards, mask)  # (B, T)
    return torch.stack([(returns * mask).sum(), (returns**2 * mask).sum(), mask.sum()])


def moments_stats(moments: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(sum x, sum x^2, n) (3,) -> the mean and (population) std, scalars."""
    n = moments[2].clamp(min=1)
    mean = moments[0] / n
    return mean, (moments[1] / n - mean**2).clamp(min=0).sqrt()


def return_to_go(
    token_rewards: torch.Tensor, mask: torch.Tensor, gamma: float = 1.0
) -> torch.Tensor:
    """G_t = sum_{k >= t} gamma^(k-t) r_k over masked tokens. (B, T) -> (B, T)."""
    r = token_rewards.float() * mask
    out = torch.zeros_like(r)
    running = torch.zeros_like(r[:, 0])  # (B,)
    for t in range(r.shape[1] - 1, -1, -1):
        running = r[:, t] + gamma * running * mask[:, t]
        out[:, t] = running
    return out * mask


def gae(
    token_rewards: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    gamma: float = 1.0,
    lam: float = 0.95,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation (Schulman et al. 2016, eq. 16) for PPO with a value head.

    token_rewards (B, T), values (B, T) = V(s_t) before token t, mask (B, T) with each row's
    valid tokens a prefix. The state after the last valid token is terminal (V = 0).
    delta_t = r_t + gamma V_{t+1} - V_t;  A_t = delta_t + gamma lam A_{t+1}.
    Returns (advantages (B, T), returns (B, T) = A + V, the value targets).
    """
    m = mask.float()
    r, v = token_rewards.float() * m, values.float().detach() * m
    adv = torch.zeros_like(r)
    next_value = torch.zeros_like(r[:, 0])  # (B,)
    next_adv = torch.zeros_like(r[:, 0])  # (B,)
    for t in range(r.shape[1] - 1, -1, -1):
        delta = r[:, t] + gamma * next_value - v[:, t]
        next_adv = (delta + gamma * lam * next_adv) * m[:, t]
        next_value = v[:, t]
        adv[:, t] = next_adv
    return adv, (adv + v) * m
