"""An episode as the trainer learns from it: `Scored`, one rollout of one task, graded.

Every rollout is an episode, and every episode lays its turns over its completion (`Turns`:
which tokens are the policy's, where each turn ends, what it earned); it may carry a harness's
rewritten histories (`Segment`). A one-turn episode (`[env] name = "single"`) is one with one
turn, every completion token the policy's. `rl.rollout.episode_sources` builds them,
`rl.rollout.rollouts` runs them in chunks, the trainer reads them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from execrl.models.engines.sampling import Completion
from execrl.rewards.result import RewardResult
from execrl.rewards.sample import Sample
from execrl.sandbox import ExecutionResult


@dataclass(frozen=True, slots=True)
class Turns:
    """An episode laid over its completion: every token after the first prompt, the policy's
    turns and the environment's (feedback, tool output) interleaved."""

    policy_mask: torch.Tensor  # (T,) 1 on the policy's tokens, 0 on the environment's
    ends: tuple[int, ...]  # each policy turn's last token, an index into the T tokens
    rewards: tuple[float, ...]  # each policy turn's reward, undiscounted
    discount: float  # env.turn_discount
    passed_by_turn: tuple[bool, ...]  # the hidden tests on the answer standing after each turn
    tool_calls: int = 0
    # each policy turn's role (`StepInfo.role`) when one policy plays several; () for one role
    roles: tuple[str, ...] = ()

    @staticmethod
    def one(n_tokens: int, reward: float, passed: bool, discount: float = 1.0) -> Turns:
        """One turn of `n_tokens` tokens, all the policy's, as `episode_scored` lays a one-turn
        episode out (records made by hand: tests, benchmarks)."""
        return Turns(torch.ones(n_tokens), (max(n_tokens - 1, 0),), (reward,), discount, (passed,))


@dataclass(frozen=True, slots=True)
class Segment:
    """Another token-exact sequence of the same episode: a harness that rewrote its history
    (cut it, summarised it, started a sub-agent) made calls that do not extend the episode's
    main sequence. Trained with the episode's advantage (`batch_rows.segment_rows`)."""

    prompt_ids: torch.Tensor  # (P,) the segment's first prompt
    token_ids: torch.Tensor  # (T,) everything after it, the policy's and the harness's
    logprobs: torch.Tensor  # (T,) behaviour log pi on the policy's tokens, 0 elsewhere
    policy_mask: torch.Tensor  # (T,) 1 on the policy's tokens


@dataclass(frozen=True, slots=True)
class Scored:
    """One episode with its final answer's program, execution result and reward: `reward.score`
    is its discounted return, `sample` its final answer, `turns` its turns."""

    task_index: int
    completion: Completion  # every token after the first prompt: the policy's turns and more
    reward: RewardResult
    sample: Sample  # the program built from the final answer and what its run said
    turns: Turns
    segments: tuple[Segment, ...] = ()  # an episode's other sequences (a rewritten history)

    @staticmethod
    def answer(task_index: int, completion: Completion, reward: RewardResult,
               sample: Sample) -> Scored:  # fmt: skip
        """A one-turn episode made by hand from its completion (tests, benchmarks); training's
        come from `rl.rollout.episode_sources.episode_scored`."""
        passed = sample.result is not None and sample.result.passed
        turns = Turns.one(completion.n_tokens, reward.score, passed)
        return Scored(task_index, completion, reward, sample, turns)

    @property
    def policy_tokens(self) -> int:
        """The tokens the policy wrote (the loss's tokens before masking), in every segment."""
        own = int(self.turns.policy_mask.sum())
        return own + sum(int(s.policy_mask.sum()) for s in self.segments)

    @property
    def environment_tokens(self) -> int:
        """The tokens the environment (or a harness) added after the first prompt."""
        every = self.completion.n_tokens + sum(len(s.token_ids) for s in self.segments)
        return every - self.policy_tokens

    def policy_mask(self) -> torch.Tensor:
        """(T,) 1 where the policy wrote the token."""
        return self.turns.policy_mask.float()

    @property
    def score(self) -> float:
        return self.reward.score

    @property
    def valid(self) -> bool:
        """Not masked by the reward (SANDBOX_ERROR, reward-model outage) and finite."""
        return not self.reward.masked and math.isfinite(self.reward.score)

    @property
    def result(self) -> ExecutionResult | None:
        return self.sample.result

    @property
    def passed(self) -> bool:
        return self.result is not None and self.result.passed

    @property
    def verdict(self) -> str:
        return "NOT_RUN" if self.result is None else str(self.result.verdict)
