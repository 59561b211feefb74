"""[credit] over the samples' own rows: whose returns the group's baseline compares, where an
episode's advantage lands, and which tokens carry the held turns' KL. Each rule is chosen once
at set-up (`episode_credit`), the identity where [credit] keeps its default, so the batch
builder (`rl.update.batch_builder`) applies all three to every batch without asking which it has.
The math is `rl.objective.credit`'s; the settings `rl.config.credit_config`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import torch

from execrl.rl.config.credit_config import CreditConfig
from execrl.rl.objective import credit
from execrl.rl.rollout.scored import Scored


@dataclass(frozen=True, slots=True)
class EpisodeCredit:
    # (valid (B,) bool, the samples) -> the rows the group's baseline is taken over
    in_baseline: Callable[[torch.Tensor, Sequence[Scored]], torch.Tensor]
    # (advantages (B, T), the samples) -> the advantages where they may land
    credited: Callable[[torch.Tensor, Sequence[Scored]], torch.Tensor]
    # the samples -> per sample (T_i,) a KL coefficient on each token; None: no held KL
    held_kl: Callable[[Sequence[Scored]], list[torch.Tensor] | None]


def episode_credit(settings: CreditConfig) -> EpisodeCredit:
    """The rules of `settings`: every turn credited, every valid episode in the baseline and no
    held KL unless [credit] says otherwise."""
    first = settings.from_turn
    return EpisodeCredit(
        in_baseline=partial(_reached, first) if settings.baseline == "reached" else _all_valid,
        credited=partial(_zero_held_turns, first) if first > 1 else _everywhere,
        held_kl=partial(_held_kl, settings.held_kl_coef, first) if settings.held_kl_coef
        else _no_held_kl,
    )  # fmt: skip


def _all_valid(valid: torch.Tensor, samples: Sequence[Scored]) -> torch.Tensor:
    return valid


def _reached(first: int, valid: torch.Tensor, samples: Sequence[Scored]) -> torch.Tensor:
    """credit.baseline = "reached": the baseline over the episodes that reached turn `first`."""
    turns = [len(s.turns.ends) for s in samples]
    return valid & credit.reached(turns, first)


def _everywhere(advantages: torch.Tensor, samples: Sequence[Scored]) -> torch.Tensor:
    return advantages


def _zero_held_turns(first: int, advantages: torch.Tensor,
                     samples: Sequence[Scored]) -> torch.Tensor:  # fmt: skip
    """credit.from_turn > 1: no advantage on the held turns' tokens (SCoRe's stage I)."""
    mask = torch.ones(advantages.shape)  # (B, T)
    for i, s in enumerate(samples):
        mask[i, : s.completion.n_tokens] = _credited_tokens(first, s)
    return advantages * mask


def _no_held_kl(samples: Sequence[Scored]) -> None:
    return None


def _held_kl(coef: float, first: int, samples: Sequence[Scored]) -> list[torch.Tensor]:
    """credit.held_kl_coef on the policy's tokens of the held turns (before `first`)."""
    return [coef * s.policy_mask() * (1 - _credited_tokens(first, s)) for s in samples]


def _credited_tokens(first: int, s: Scored) -> torch.Tensor:
    """(T_i,) 1 on the tokens of turns >= `first`, 0 on the held turns'."""
    return credit.from_turn(s.completion.n_tokens, s.turns.ends, first)
