"""Correction samples from failed attempts (`credit.correction_coef`).

Correction-oriented policy optimisation (CIPO; Ren et al. 2026, "Learning from Failures:
Correction-Oriented Policy Optimization with Verifiable Rewards") turns the group's failed
attempts into supervision for correcting them, learnt beside the RL objective. Over self-
correction episodes: each episode whose first attempt failed the hidden tests and got a feedback
turn gives one extra sample, whose context is that episode exactly as the model saw it before
its second turn (the prompt, the failed attempt, the feedback: the same token ids, so nothing is
re-tokenised) and whose completion is a passing answer of the same group, another episode's (its
first attempt when that passed, or the correction that passed). The learner gives the
completion's tokens a fixed positive advantage; the context carries mask 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from execrl.rl.rollout.scored import Scored


@dataclass(frozen=True, slots=True)
class CorrectionSample:
    task_index: int
    prompt_ids: torch.Tensor  # (P,) the episode's first prompt
    context_ids: torch.Tensor  # (C,) the failed attempt and its feedback, as the model saw them
    answer_ids: torch.Tensor  # (A,) a passing answer of the group, through its last token

    @property
    def token_ids(self) -> torch.Tensor:
        """(C + A,) what follows the prompt: the context, then the answer."""
        return torch.cat([self.context_ids, self.answer_ids])

    @property
    def mask(self) -> torch.Tensor:
        """(C + A,) 1 on the answer's tokens only."""
        return torch.cat([torch.zeros(len(self.context_ids)), torch.ones(len(self.answer_ids))])


def correction_samples(group: Sequence[Scored]) -> list[CorrectionSample]:
    """One sample per episode of the group whose first attempt failed and got feedback, paired
    in turn with the group's passing answers (never the episode's own); none without one."""
    answers = [(i, ids) for i, s in enumerate(group) if (ids := passing_answer(s)) is not None]
    out: list[CorrectionSample] = []
    for i, s in enumerate(group):
        context = failed_context(s)
        others = [ids for j, ids in answers if j != i]
        if context is None or not others:
            continue
        answer = others[len(out) % len(others)]
        out.append(CorrectionSample(s.task_index, s.completion.prompt_ids, context, answer))
    return out


def failed_context(s: Scored) -> torch.Tensor | None:
    """The episode's tokens before its second turn, when its first attempt failed the hidden
    tests and a second turn followed; else None."""
    turns = s.turns
    if not s.valid or len(turns.ends) < 2 or turns.passed_by_turn[0]:
        return None
    return s.completion.token_ids[: _turn_start(turns.policy_mask, turns.ends[0])]


def passing_answer(s: Scored) -> torch.Tensor | None:
    """The tokens of the turn whose answer passed the hidden tests (the episode's last), or
    None when the episode did not pass."""
    turns = s.turns
    if not s.valid or not s.passed or s.completion.truncated:
        return None
    start = 0 if len(turns.ends) == 1 else _turn_start(turns.policy_mask, turns.ends[-2])
    return s.completion.token_ids[start : turns.ends[-1] + 1]


def _turn_start(policy_mask: torch.Tensor, previous_end: int) -> int:
    """The index of the first policy token after the turn that ended at `previous_end`."""
    later = policy_mask[previous_end + 1 :].nonzero()
    if not len(later):
        raise ValueError(f"no policy turn after the one that ended at token {previous_end}")
    return previous_end + 1 + int(later[0])
