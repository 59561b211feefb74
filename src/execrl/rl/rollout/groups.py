"""Groups: the completions of one prompt, what processes share of them, and which count.

A `GroupSummary` is the small picklable record of one group that every process sees (rewards,
validity, pass, lengths, verdicts, flags, reward components); the `Scored` samples themselves
stay in the process that generated them. `gather` runs the first stages of a step, draw prompts
-> sample and score -> filter groups, with DAPO's bounded refills.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from execrl.rewards.result import HACK_FLAGS, Flag
from execrl.rl.parallel import dist
from execrl.rl.rollout.prompts import PromptSampler, informative
from execrl.rl.rollout.rollouts import Rollouts, RolloutTimes, gather_chunks
from execrl.rl.rollout.scored import Scored


def counts_in_loss(valid: bool, truncated: bool, n_tokens: int, overlong_filter: bool) -> bool:
    """The one rule for which samples enter the loss and its denominator: a valid (unmasked)
    reward, at least one token, and, with `rl.overlong_filter` (DAPO), not cut by the budget."""
    return valid and n_tokens > 0 and not (overlong_filter and truncated)


# Flags worth a look at the sample itself (flagged.jsonl): hacks and machinery failures. NO_CODE
# and NOISE_FLIPPED are counted (flag/<name>) but are too common to list one by one.
_LISTED = frozenset(HACK_FLAGS | {Flag.TESTS_NOT_RUN, Flag.SANDBOX_ERROR, Flag.REWARD_MODEL_ERROR})
_TEXT_CAP = 4000  # characters of a flagged completion kept


@dataclass(frozen=True, slots=True)
class FlaggedCompletion:
    task_id: str
    completion: str  # the first _TEXT_CAP characters
    flags: tuple[str, ...]
    reason: str
    score: float
    masked: bool

    @classmethod
    def of(cls, s: Scored) -> FlaggedCompletion | None:
        if not s.reward.flags & _LISTED:
            return None
        return cls(s.sample.task.id, s.completion.text[:_TEXT_CAP],
                   tuple(sorted(str(f) for f in s.reward.flags)), s.reward.reason,
                   s.score, s.reward.masked)  # fmt: skip


@dataclass(frozen=True, slots=True)
class EpisodeSummary:
    """What the log tells of one episode."""

    turns: int  # the policy's turns
    tool_calls: int
    environment_tokens: int  # feedback and tool output (the prompt excluded)
    policy_tokens: int
    passed_by_turn: tuple[bool, ...]  # the hidden tests on the answer standing after each turn

    @classmethod
    def of(cls, s: Scored) -> EpisodeSummary:
        turns = s.turns
        policy = s.policy_tokens
        # one entry per turn the episode took, in every segment (a harness's calls)
        taken = len(turns.passed_by_turn)
        return cls(taken, turns.tool_calls, s.environment_tokens, policy,
                   turns.passed_by_turn)  # fmt: skip


@dataclass(frozen=True, slots=True)
class GroupSummary:
    """What every process learns of one group (prompt-major, one entry per completion)."""

    task: int  # index of the task in the training set
    scores: tuple[float, ...]
    valid: tuple[bool, ...]  # not masked
    passed: tuple[bool, ...]  # every hidden test passed
    n_tokens: tuple[int, ...]
    truncated: tuple[bool, ...]
    verdicts: tuple[str, ...]
    flags: tuple[tuple[str, ...], ...]
    components: tuple[Mapping[str, float], ...]  # reward tree node name -> score
    sandbox_causes: tuple[str, ...]  # why a run was SANDBOX_ERROR ("" otherwise)
    flagged: tuple[FlaggedCompletion, ...]  # the samples flagged as hacks or machinery failures
    episodes: tuple[EpisodeSummary, ...] = ()  # one per completion (the log's episode/ rows)
    # sequences per sample beyond its own: an episode's other segments (a rewritten history)
    extra_sequences: tuple[int, ...] = ()

    @classmethod
    def of(cls, group: list[Scored]) -> GroupSummary:
        return cls(
            task=group[0].task_index,
            scores=tuple(s.score for s in group),
            valid=tuple(s.valid for s in group),
            passed=tuple(s.passed for s in group),
            n_tokens=tuple(s.policy_tokens for s in group),
            truncated=tuple(s.completion.truncated for s in group),
            verdicts=tuple(s.verdict for s in group),
            flags=tuple(tuple(sorted(str(f) for f in s.reward.flags)) for s in group),
            components=tuple(dict(s.reward.components) for s in group),
            sandbox_causes=tuple(
                getattr(s.result, "sandbox_error_cause", "") if s.result is not None else ""
                for s in group
            ),
            flagged=tuple(f for f in map(FlaggedCompletion.of, group) if f is not None),
            episodes=tuple(EpisodeSummary.of(s) for s in group),
            extra_sequences=tuple(len(s.segments) for s in group),
        )

    def pass_rate(self) -> float | None:
        """Mean pass over the valid samples; None when every sample was masked."""
        passed = [p for p, v in zip(self.passed, self.valid, strict=True) if v]
        return sum(passed) / len(passed) if passed else None

    def informative(self) -> bool:
        return informative(self.scores, self.valid)

    def loss_weight(self, per_token: bool, overlong_filter: bool) -> int:
        """This group's share of the loss denominator: tokens or sequences that count (an
        episode's other segments are sequences of their own)."""
        extra = self.extra_sequences or (0,) * len(self.valid)
        return sum(
            (n if per_token else 1 + e)
            for v, n, t, e in zip(self.valid, self.n_tokens, self.truncated, extra, strict=True)
            if counts_in_loss(v, t, n, overlong_filter)
        )


@dataclass
class Gathered:
    """What a step's first stages gathered: this process's kept groups and every summary."""

    local: list[list[Scored]]  # kept groups generated here, in global kept order
    kept: list[GroupSummary]  # kept groups, all processes, global order
    every: list[GroupSummary]  # every group sampled this step, kept or dropped
    drawn: int = 0  # groups sampled, all rounds
    rounds: int = 0
    times: RolloutTimes = field(default_factory=RolloutTimes)


def gather(sampler: PromptSampler, rollouts: Rollouts, group_size: int, groups_per_step: int,
           dynamic_sampling: bool, max_rounds: int, step: int) -> Gathered:  # fmt: skip
    """Draw prompts, sample and score their groups, keep the informative ones (DAPO dynamic
    sampling), refill at most `max_rounds` times."""
    rank, world = dist.rank(), dist.world_size()
    out = Gathered([], [], [])
    used: list[int] = []
    while len(out.kept) < groups_per_step and out.rounds < max_rounds:
        tasks = sampler.draw(groups_per_step - len(out.kept), exclude=used)
        if not tasks:
            break
        used += tasks
        chunks = rollouts.chunks(tasks)
        mine = gather_chunks(len(chunks), rank, world)
        local = rollouts.run(
            [(i, chunks[i]) for i in mine], group_size, step, out.rounds, out.times
        )
        shared = dist.all_gather_objects(
            {i: [GroupSummary.of(g) for g in groups] for i, groups in local.items()}
        )
        merged = {i: s for part in shared for i, s in part.items()}
        for chunk_id in range(len(chunks)):
            for g, summary in enumerate(merged[chunk_id]):
                rate = summary.pass_rate()
                if rate is not None:
                    sampler.update(summary.task, rate)
                out.every.append(summary)
                if len(out.kept) < groups_per_step and (
                    not dynamic_sampling or summary.informative()
                ):
                    out.kept.append(summary)
                    if chunk_id in local:
                        out.local.append(local[chunk_id][g])
        out.drawn += len(tasks)
        out.rounds += 1
        if not dynamic_sampling:
            break
    return out
