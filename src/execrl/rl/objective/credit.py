"""Credit across the turns of an episode. Pure functions, shapes in comments.

A multi-turn trajectory interleaves the policy's tokens with the environment's (feedback, tool
output): T positions of which only those with mask 1 are the policy's. The token-level
estimators of `rl.objective.advantages` (GAE, REINFORCE++'s return-to-go) assume each row's valid
tokens are a prefix and stop their recursions at the first masked position; over an episode they
must instead run over the policy's tokens with the environment's skipped, so that the return of a
first-turn token includes what later turns earned. `compact` packs each row's policy tokens into a
prefix, the estimator runs there, and `expand` puts the results back in place (zeros on the
environment's positions). For a one-turn rollout (the mask already a prefix) both are the identity.

The objective of an episode is its discounted return sum_k gamma_turn^k r_k over its policy
turns k = 0, 1, ...; `turn_token_rewards` lays each turn's reward, discounted to the episode's
start, on that turn's last token, so that the undiscounted token-level return of a turn-j token
is gamma_turn^j G_j, the policy-gradient weight of the discounted objective (Sutton and Barto,
sec. 13.3: the gamma^t factor of the episodic discounted case).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def compact(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """values (B, T), mask (B, T) -> (B, T'): each row's masked-in values moved, in order, to
    the front (T' = the most any row has, at least 1); the rest 0."""
    keep = mask.bool()
    counts = keep.sum(1)  # (B,)
    out = torch.zeros(values.shape[0], max(1, int(counts.max()) if counts.numel() else 1),
                      dtype=values.dtype)  # fmt: skip
    for row in range(values.shape[0]):
        out[row, : int(counts[row])] = values[row][keep[row]]
    return out


def expand(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The inverse of `compact`: values (B, T') back to the masked-in positions of mask (B, T);
    0 elsewhere."""
    keep = mask.bool()
    out = torch.zeros(mask.shape, dtype=values.dtype)
    for row in range(mask.shape[0]):
        n = int(keep[row].sum())
        out[row][keep[row]] = values[row, :n]
    return out


def turn_token_rewards(
    length: int, turn_ends: Sequence[int], turn_rewards: Sequence[float], discount: float
) -> torch.Tensor:
    """(length,) the reward on each token of one trajectory: turn k's reward times
    discount^k on its last token (`turn_ends[k]`, an index into the trajectory), 0 elsewhere.
    Rewards of turns that end on the same token add up."""
    if len(turn_ends) != len(turn_rewards):
        raise ValueError(f"{len(turn_ends)} turn ends but {len(turn_rewards)} turn rewards")
    out = torch.zeros(length)
    for k, (end, reward) in enumerate(zip(turn_ends, turn_rewards, strict=True)):
        if not 0 <= end < length:
            raise ValueError(f"turn {k} ends at token {end}, outside a trajectory of {length}")
        out[end] += reward * discount**k
    return out


def discounted_return(turn_rewards: Sequence[float], discount: float) -> float:
    """sum_k discount^k r_k: the episode's return, what GRPO-family advantages compare."""
    return float(sum(r * discount**k for k, r in enumerate(turn_rewards)))


def turn_tokens(length: int, turn_ends: Sequence[int], turns: Sequence[int]) -> torch.Tensor:
    """(length,) 1 on the positions of the given turns (0-based), 0 elsewhere: turn k holds the
    positions after the end of turn k-1 up to its own end, so the environment's tokens before
    it count as its (a policy mask takes them out). With several roles in an episode, a role's
    turns are its tokens."""
    out = torch.zeros(length)
    for k in turns:
        start = turn_ends[k - 1] + 1 if k > 0 else 0
        out[start : turn_ends[k] + 1] = 1.0
    return out


def role_return(turn_rewards: Sequence[float], turns: Sequence[int], discount: float) -> float:
    """sum_{k in turns} discount^k r_k: the part of an episode's return that the given turns
    (one role's) earned, each discounted to the episode's start as in `discounted_return`, so
    the roles' returns add up to the episode's."""
    return float(sum(turn_rewards[k] * discount**k for k in turns))


def from_turn(length: int, turn_ends: Sequence[int], first_turn: int) -> torch.Tensor:
    """(length,) 1 on the positions after the end of turn `first_turn - 1` (turns counted from
    1), 0 before: multiplied into an episode's advantages, only turns >= first_turn are trained
    (`credit.from_turn`). An episode that ended before `first_turn` is all 0."""
    out = torch.ones(length)
    if first_turn > 1:
        before = turn_ends[first_turn - 2] + 1 if len(turn_ends) >= first_turn else length
        out[:before] = 0.0
    return out


def reached(n_turns: Sequence[int], first_turn: int) -> torch.Tensor:
    """(B,) bool: the episodes that reached turn `first_turn` (turns counted from 1). With
    `credit.baseline = "reached"` the group's baseline is taken over these alone: the held
    turns carry no advantage, so an episode that passed before `first_turn` has nothing to
    learn, and only the episodes that needed a correction are compared with one another."""
    return torch.tensor([n >= first_turn for n in n_turns], dtype=torch.bool)
