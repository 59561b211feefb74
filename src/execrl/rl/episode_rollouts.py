"""Training rollouts that are episodes: `[env]` other than "single".

`EpisodeGroups` runs a group of episodes per task (`rl.episodes.run_episodes`: one batched
`generate` per turn, the environment grading through the rewards layer's one scoring path) and
turns each into a `Scored` the trainer learns from: the completion is every token after the first
prompt, the policy's and the environment's interleaved, with `Turns` saying which are the
policy's, where each turn ends and what it earned. The environment's tokens carry loss mask 0:
no loss, KL, entropy, advantage or per-token reward lands on them (`rl.trainer`).
"""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Any

import torch

from execrl.models.sampling import TRUNCATED, Completion, SamplingParams
from execrl.rewards.result import RewardResult
from execrl.rewards.scorer import RewardScorer, build_sample
from execrl.rl.credit import discounted_return
from execrl.rl.episodes import EnvConfig, Episode, make_env, run_episodes
from execrl.rl.episodes.trajectory import Trajectory
from execrl.rl.rollout import Scored, Segment, Turns
from execrl.tasks.schema import Task


class EpisodeGroups:
    """(task indices, group size) -> groups of scored episodes, prompt-major."""

    def __init__(self, config: EnvConfig, scorer: RewardScorer, engine: Any, tokenizer: Any,
                 tasks: list[Task], params: SamplingParams, chat: bool,
                 segments: str = "mask") -> None:  # fmt: skip
        self.config, self.scorer, self.engine = config, scorer, engine
        self.tokenizer, self.tasks, self.params, self.chat = tokenizer, tasks, params, chat
        # a harness's rewritten history: "every" segment trained, the "last" alone, or "mask"
        # (`TrainConfig.segment_training`)
        self.segments = segments

    def __call__(self, task_indices: list[int], group_size: int) -> list[list[Scored]]:
        order = [t for t in task_indices for _ in range(group_size)]
        episodes = self.episodes([self.tasks[t] for t in order])
        if self.segments != "every":  # the segment holding the final call stands alone
            episodes = [replace(e, segments=()) for e in episodes]
        scored = [
            episode_scored(t, self.tasks[t], e, self.config.turn_discount, self.scorer)
            for t, e in zip(order, episodes, strict=True)
        ]
        return [scored[g * group_size : (g + 1) * group_size] for g in range(len(task_indices))]

    def episodes(self, tasks: list[Task]) -> list[Episode]:
        if self.config.name == "harness":  # a user's agent program runs each episode
            from execrl.rl.episodes.harness import run_harness_episodes

            return run_harness_episodes(tasks, self.engine, self.tokenizer, self.params,
                                        self.scorer, self.config, chat=self.chat, log=_log,
                                        segments=self.segments != "mask")  # fmt: skip
        return run_episodes(
            lambda: make_env(self.config, self.scorer), tasks, self.engine, self.tokenizer,
            self.params, chat=self.chat, max_tokens=self.config.max_tokens,
        )  # fmt: skip


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def episode_scored(task_index: int, task: Task, episode: Episode, discount: float,
                   scorer: RewardScorer) -> Scored:  # fmt: skip
    """One episode as the trainer learns from it."""
    trajectory = episode.trajectory
    if trajectory is None:
        raise ValueError(f"task {task.id}: an episode without token ids cannot be trained on")
    own = _segment(trajectory)  # the sequence that holds the final turn
    mask = own.policy_mask  # (T,)
    truncated = episode.truncated or (bool(episode.finishes) and episode.finishes[-1] in TRUNCATED)
    completion = Completion(
        prompt_index=0,
        text=transcript(episode),
        prompt_ids=own.prompt_ids,
        token_ids=own.token_ids,
        logprobs=own.logprobs,
        finish="length" if truncated else "eos",
    )
    graded = next((s.info.graded for s in reversed(episode.steps) if s.info.graded), None)
    episode_return = discounted_return(trajectory.turn_rewards, discount)
    if graded is not None:
        reward = replace(graded.reward, score=episode_return, token_credit=None,
                         masked=graded.reward.masked or episode.masked)  # fmt: skip
        sample = graded.sample
    else:  # a user's environment that grades without the scorer
        reward = RewardResult(0.0 if episode.masked else episode_return, masked=episode.masked)
        answer = episode.outputs[-1] if episode.outputs else ""
        sample = build_sample(task, answer, scorer.config.program)
    turns = Turns(
        policy_mask=mask,
        ends=_turn_ends(trajectory.turn_spans, trajectory.prompt_length, mask),
        rewards=trajectory.turn_rewards,
        discount=discount,
        passed_by_turn=tuple(episode.passed_by_turn(len(episode.steps))),
        tool_calls=max([0] + [s.info.tool_calls for s in episode.steps]),
    )
    return Scored(task_index, completion, reward, sample, turns,
                  tuple(_segment(t) for t in episode.segments))  # fmt: skip


def _segment(trajectory: Trajectory) -> Segment:
    """A trajectory's tensors split at its first prompt: what the trainer learns from."""
    start = trajectory.prompt_length
    return Segment(
        prompt_ids=torch.tensor(trajectory.token_ids[:start], dtype=torch.long),
        token_ids=torch.tensor(trajectory.token_ids[start:], dtype=torch.long),
        logprobs=torch.tensor(trajectory.logprobs[start:], dtype=torch.float32),
        policy_mask=torch.tensor(trajectory.loss_mask[start:], dtype=torch.float32),
    )


def transcript(episode: Episode) -> str:
    """Every turn after the prompt, for people (the report's examples, flagged.jsonl): the
    model's answers and, between them, what the environment said."""
    parts = []
    for k, output in enumerate(episode.outputs):
        parts.append(f"[turn {k + 1}: model]\n{output}")
        if k < len(episode.observations):
            parts.append(f"[turn {k + 1}: environment]\n{episode.observations[k]}")
    return "\n".join(parts)


def _turn_ends(
    spans: tuple[tuple[int, int], ...], start: int, mask: torch.Tensor
) -> tuple[int, ...]:
    """Each turn's last token as an index into the completion. A turn that wrote nothing (an
    immediate end of sequence) credits the policy's last token before it, else the first
    policy token after: its reward must land on a token the policy wrote."""
    policy = mask.nonzero().flatten().tolist()
    ends = []
    for lo, hi in spans:
        if hi > lo:
            ends.append(hi - 1 - start)
            continue
        before = [i for i in policy if i < lo - start]
        ends.append(before[-1] if before else (policy[0] if policy else 0))
    return tuple(ends)
