"""How each environment rolls out a chunk of tasks: the sources `rl.rollout.rollouts` runs.

`episode_source` picks one from `[env]`. `OneTurn` is the "single" environment's (one turn,
graded by the hidden tests, `episodes.builtin.Single`): one batched `generate` per chunk, and
the whole grading (`Single.grade_many`, the rewards layer's one scoring path) left to the
scoring thread while the next chunk generates. `MultiTurn` runs a group of episodes per task
(`episodes.turn_loop.TurnLoop`: one batched `generate` per turn, the environment grading as
each turn ends; a harness's agent program for `env.name = "harness"`) and turns each into a
`Scored`: the completion is every token after the first prompt, the policy's and the
environment's interleaved, with `Turns` saying which are the policy's, where each turn ends and
what it earned. The environment's tokens carry loss mask 0: no loss, KL, entropy, advantage or
per-token reward lands on them (`rl.update.batch_builder`). `execrl eval --env` plays its episodes
through `MultiTurn.episodes`, a batch at a time, and reads them whole.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Protocol

import torch

from execrl.models.engines.engine import RolloutEngine
from execrl.models.engines.sampling import TRUNCATED, Completion, SamplingParams, encode_prompts
from execrl.models.prompting.chat import uses_chat_template
from execrl.rewards.result import RewardResult
from execrl.rewards.scoring.scorer import RewardScorer, build_sample
from execrl.rl.episodes import EnvConfig, Episode, make_env
from execrl.rl.episodes.builtin import Single
from execrl.rl.episodes.trajectory import Conversation, TextConversation, Trajectory
from execrl.rl.episodes.turn_loop import TurnLoop, finish_groups, play_out
from execrl.rl.objective.credit import discounted_return
from execrl.rl.rollout.scored import Scored, Segment, Turns
from execrl.tasks.schema import Task


# what `Rollouts` spent on a step; a source's grading adds its sandbox time here
@dataclass(slots=True)
class RolloutTimes:
    generate_s: float = 0.0
    execute_s: float = 0.0  # sandbox busy time (overlaps generation)
    wait_s: float = 0.0  # time generation waited for the sandbox at the end
    executions: int = 0
    latencies: list[float] = field(default_factory=list)  # wall seconds of each execution


@dataclass(frozen=True, slots=True)
class NextTurn:
    """A chunk whose episodes go on after a turn was graded: `generate` their next turn (on the
    caller's thread, under the chunk's own RNG), then grade it on the scoring thread."""

    generate: Callable[[], Grading]


# What generating a chunk leaves to the scoring thread: grading it gives the chunk's groups of
# episodes (prompt-major), or its next turn to generate
Grading = Callable[[RolloutTimes], "list[list[Scored]] | NextTurn"]


class EpisodeSource(Protocol):
    def generate(self, task_indices: list[int], group_size: int) -> Grading:
        """Sample a group of episodes per task (on the caller's thread, under its seeded RNG);
        what is left to grade on the scoring thread."""
        ...


def episode_source(env: EnvConfig, engine: RolloutEngine, tokenizer: Any, tasks: list[Task],
                   scorer: RewardScorer, params: SamplingParams, chat: bool | None,
                   segments: str = "mask") -> EpisodeSource:  # fmt: skip
    """The rollouts of `env` on `tasks`; `chat` as `model.chat` says it (None: auto)."""
    if env.one_turn:
        prompt_ids = encode_prompts(tokenizer, [t.prompt for t in tasks], chat=chat)
        return OneTurn(engine, tokenizer, tasks, prompt_ids, scorer, params)
    return MultiTurn(env, scorer, engine, tokenizer, tasks, params,
                     uses_chat_template(tokenizer, chat), segments)  # fmt: skip


class OneTurn:
    """The "single" environment's episodes: one completion each, graded while the next chunk
    generates."""

    def __init__(self, engine: RolloutEngine, tokenizer: Any, tasks: list[Task],
                 prompt_ids: list[list[int]], scorer: RewardScorer,
                 params: SamplingParams) -> None:  # fmt: skip
        self.engine, self.tokenizer, self.tasks = engine, tokenizer, tasks
        self.prompt_ids = prompt_ids  # per task: list[int]
        self.scorer, self.params = scorer, params
        self.offsets = scorer.config.token_credit.enabled  # token credit maps lines to tokens

    def generate(self, task_indices: list[int], group_size: int) -> Grading:
        """One engine call for the chunk; a chunk of tasks in several languages (a task mix)
        gets one call per language, since a row's stop rule closes on a block in its own."""
        languages = sorted({self.tasks[t].language for t in task_indices})
        completions: list[Completion] = []
        for language in languages:
            positions = [
                i for i, t in enumerate(task_indices) if self.tasks[t].language == language
            ]
            made = self._generate([task_indices[i] for i in positions], group_size, language)
            completions += [replace(c, prompt_index=positions[c.prompt_index]) for c in made]
        completions.sort(key=lambda c: c.prompt_index)  # stable: prompt-major, as one call gives
        return partial(self._grade, task_indices, completions, group_size)

    def _generate(
        self, task_indices: list[int], group_size: int, language: str
    ) -> list[Completion]:
        params = replace(self.params, code_language=language)
        return self.engine.generate(
            [self.prompt_ids[t] for t in task_indices], params, n=group_size
        )

    def _grade(self, tasks: list[int], completions: list[Completion], group_size: int,
               times: RolloutTimes) -> list[list[Scored]]:  # fmt: skip
        start = time.perf_counter()
        offsets = (
            [token_offsets(self.tokenizer, c.token_ids.tolist(), c.text) for c in completions]
            if self.offsets
            else None
        )
        scored = Single.grade_many(
            self.scorer,
            [self.tasks[tasks[c.prompt_index]] for c in completions],
            [c.text for c in completions],
            offsets=offsets,
            n_tokens=[c.n_tokens for c in completions],
        )
        for x in scored:
            if x.sample.result is not None and x.sample.program is not None:
                times.latencies.append(x.sample.result.wall_s)
                times.executions += 1
        times.execute_s += time.perf_counter() - start
        out = [
            Scored(tasks[c.prompt_index], c, x.reward, x.sample)
            for c, x in zip(completions, scored, strict=True)
        ]
        return [out[g * group_size : (g + 1) * group_size] for g in range(len(tasks))]


class MultiTurn:
    """Episodes of several turns (or a harness's calls), graded as each turn ends. Each keeps
    its turns in a `conversation()`: token ids by default; `TextConversation` with a text-only
    model (`turn_loop.TextReplies` as the engine: evaluation only, nothing to train on)."""

    def __init__(self, config: EnvConfig, scorer: RewardScorer, engine: Any, tokenizer: Any,
                 tasks: list[Task], params: SamplingParams | None, chat: bool,
                 segments: str = "mask",
                 conversation: Callable[[], Conversation | TextConversation] | None = None,
                 ) -> None:  # fmt: skip
        self.config, self.scorer, self.engine = config, scorer, engine
        self.tokenizer, self.tasks, self.params, self.chat = tokenizer, tasks, params, chat
        # a harness's rewritten history: "every" segment trained, the "last" alone, or "mask"
        # (`TrainConfig.segment_training`)
        self.segments = segments
        self.conversation = conversation or partial(Conversation, tokenizer, chat)
        # what finishes a group whose rewards depend on one another (`GroupRewarded`), made
        # when the first group is finished, as the turn loop makes its environments
        self._finisher: Any = None

    def episodes(self, task_indices: list[int]) -> list[Episode]:
        """One episode per task index, in order, every turn generated and graded here (one
        batch of episodes after another: `execrl eval --env`); a task's episodes are its group."""
        tasks = [self.tasks[t] for t in task_indices]
        episodes = play_out(self._loop(tasks), self.engine, self.params)
        return self._finished(tasks, episodes, [(t.id, t.prompt) for t in tasks])

    def _finished(self, tasks: list[Task], episodes: list[Episode],
                  groups: Sequence[Hashable]) -> list[Episode]:  # fmt: skip
        if self.config.kind.runs_harness:
            return episodes
        if self._finisher is None:
            self._finisher = make_env(self.config, self.scorer)
        return finish_groups(self._finisher, tasks, episodes, groups)

    def _loop(self, tasks: list[Task]) -> TurnLoop:
        return TurnLoop(lambda: make_env(self.config, self.scorer), tasks, self.conversation,
                        max_tokens=self.config.max_tokens)  # fmt: skip

    def generate(self, task_indices: list[int], group_size: int) -> Grading:
        """An environment's episodes: the first turn generated here, each turn stepped on the
        scoring thread, the next generated when the caller gets back to this chunk. A harness's
        episodes run whole here (its program calls the policy server itself)."""
        order = [t for t in task_indices for _ in range(group_size)]
        tasks = [self.tasks[t] for t in order]
        if self.config.kind.runs_harness:  # a user's agent program runs each episode
            from execrl.rl.episodes.harness import run_harness_episodes

            episodes = run_harness_episodes(tasks, self.engine, self.tokenizer, self.params,
                                            self.scorer, self.config, chat=self.chat, log=_log,
                                            segments=self.segments != "mask")  # fmt: skip
            groups = self.groups(order, episodes, group_size)
            return lambda times: groups
        return self._turn(self._loop(tasks), order, group_size)

    def _turn(self, loop: TurnLoop, order: list[int], group_size: int) -> Grading:
        completions = self.engine.generate(loop.prompts(), self.params, n=1)

        def grade(times: RolloutTimes) -> list[list[Scored]] | NextTurn:
            start = time.perf_counter()
            loop.step(completions)
            times.execute_s += time.perf_counter() - start
            if loop.active:
                return NextTurn(lambda: self._turn(loop, order, group_size))
            return self.groups(order, loop.episodes(), group_size)

        return grade

    def groups(self, order: list[int], episodes: list[Episode],
               group_size: int) -> list[list[Scored]]:  # fmt: skip
        """Episodes, one per entry of `order` (task indices, each repeated for its group), as
        prompt-major groups of what the trainer learns from."""
        if self.segments != "every":  # the segment holding the final call stands alone
            episodes = [replace(e, segments=()) for e in episodes]
        tasks = [self.tasks[t] for t in order]
        episodes = self._finished(tasks, episodes, [i // group_size for i in range(len(order))])
        scored = [
            episode_scored(t, self.tasks[t], e, self.config.turn_discount, self.scorer)
            for t, e in zip(order, episodes, strict=True)
        ]
        return [scored[g : g + group_size] for g in range(0, len(scored), group_size)]


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
        roles=_roles(episode),
    )
    return Scored(task_index, completion, reward, sample, turns,
                  tuple(_segment(t) for t in episode.segments))  # fmt: skip


def _roles(episode: Episode) -> tuple[str, ...]:
    """Each turn's role (`StepInfo.role`); () when the environment has one role."""
    roles = tuple(s.info.role for s in episode.steps)
    return roles if any(roles) else ()


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


def token_offsets(tokenizer: Any, token_ids: list[int], text: str) -> tuple[tuple[int, int], ...]:
    """(start, end) characters of `text` that each generated token wrote: the decoded length
    before and after it. Tokens past the end of `text` (a stop sequence cut from it) get an
    empty span at the end. Decoding the ids, not re-tokenizing the text, keeps exactly one
    span per token: a re-tokenization can split the text differently."""
    spans = []
    before = 0
    for i in range(len(token_ids)):
        after = min(len(text), len(tokenizer.decode(token_ids[: i + 1])))
        after = max(after, before)  # a partial UTF-8 character decodes short: no negative span
        spans.append((before, after))
        before = after
    return tuple(spans)
