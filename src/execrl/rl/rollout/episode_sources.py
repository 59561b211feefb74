"""How an environment rolls out a chunk of tasks: the source `rl.rollout.rollouts` runs.

`EnvSource` runs a group of episodes per task for every environment, "single" (one turn graded
by the hidden tests, `episodes.builtin.Single`) as any other: `episodes.turn_loop.TurnLoop`, one
batched `generate` per turn (the first turn's prompt once per group, sampled group-size times;
one call per task language, for the stop rule), the environments stepping on the scoring
thread while the next chunk generates (a "single" turn's answers graded in one call of the
scoring path, `env.StepsTogether`); a harness's agent program for `env.name = "harness"`. Each
episode becomes a `Scored` (`episode_scored`): the completion is every token after the first
prompt, the policy's and the environment's interleaved, with `Turns` saying which are the
policy's, where each turn ends and what it earned. The environment's tokens carry loss mask 0:
no loss, KL, entropy, advantage or per-token reward lands on them (`rl.update.batch_builder`).
`execrl eval --env` plays its episodes through `EnvSource.episodes`, a batch at a time, and
reads them whole.
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
from execrl.models.engines.sampling import Completion, SamplingParams
from execrl.models.prompting.chat import uses_chat_template
from execrl.rewards.result import RewardResult
from execrl.rewards.scoring.scorer import RewardScorer, build_sample
from execrl.rl.episodes import EnvConfig, Episode, StepResult, make_env
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
    return EnvSource(env, scorer, engine, tokenizer, tasks, params,
                     uses_chat_template(tokenizer, chat), segments)  # fmt: skip


class EnvSource:
    """An environment's episodes (or a harness's calls), graded as each turn ends. Each keeps
    its turns in a `conversation()`: token ids by default; `TextConversation` with a text-only
    model (`turn_loop.TextReplies` as the engine: evaluation only, nothing to train on). A code
    block's end stops a turn only where the environment's turn is the whole answer
    (`EnvConfig.turn_sampling`)."""

    def __init__(self, config: EnvConfig, scorer: RewardScorer, engine: Any, tokenizer: Any,
                 tasks: list[Task], params: SamplingParams | None, chat: bool,
                 segments: str = "mask",
                 conversation: Callable[[], Conversation | TextConversation] | None = None,
                 ) -> None:  # fmt: skip
        self.config, self.scorer, self.engine = config, scorer, engine
        self.tokenizer, self.tasks, self.chat = tokenizer, tasks, chat
        self.params = params if params is None else config.turn_sampling(params)
        # a harness's rewritten history: "every" segment trained, the "last" alone, or "mask"
        # (`TrainConfig.segment_training`)
        self.segments = segments
        # one encode of each task's first prompt, whatever the episodes and steps that start there
        self.conversation = conversation or partial(Conversation, tokenizer, chat, starts={})
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
                        max_tokens=self.config.max_tokens, tokenizer=self.tokenizer)  # fmt: skip

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
        return self._turn(self._loop(tasks), order, group_size, group_size)

    def _turn(self, loop: TurnLoop, order: list[int], group_size: int, shared: int) -> Grading:
        """Generate the loop's next turn here; grade it on the scoring thread. `shared`: how
        many episodes in a row may share a prompt (a group, on its first turn)."""
        assert self.params is not None, "sampling parameters to generate with"
        prompts = loop.prompts()
        languages = [loop.tasks[i].language for i in loop.active]
        completions = turn_completions(self.engine, prompts, languages, self.params,
                                       shared_prompts(prompts, shared))  # fmt: skip

        def grade(times: RolloutTimes) -> list[list[Scored]] | NextTurn:
            start = time.perf_counter()
            _count_runs(loop.step(completions), times)
            times.execute_s += time.perf_counter() - start
            if loop.active:
                return NextTurn(lambda: self._turn(loop, order, group_size, 1))
            return self.groups(order, loop.episodes(), group_size)

        return grade

    def groups(self, order: list[int], episodes: list[Episode],
               group_size: int) -> list[list[Scored]]:  # fmt: skip
        """Episodes, one per entry of `order` (task indices, each repeated for its group), as
        prompt-major groups of what the trainer learns from."""
        if self.segments != "every":  # the segment holding the final call stands alone
            episodes = [replace(e, segments=()) if e.segments else e for e in episodes]
        tasks = [self.tasks[t] for t in order]
        episodes = self._finished(tasks, episodes, [i // group_size for i in range(len(order))])
        scored = [
            episode_scored(t, self.tasks[t], e, self.config.turn_discount, self.scorer)
            for t, e in zip(order, episodes, strict=True)
        ]
        return [scored[g : g + group_size] for g in range(0, len(scored), group_size)]


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def shared_prompts(prompts: Sequence[Any], run: int) -> int:
    """How many episodes in a row share each prompt: `run` where every run of `run` prompts
    is one prompt repeated (a group's first turn: its task's prompt), else 1."""
    if run > 1 and all(prompts[i] == prompts[i - i % run] for i in range(len(prompts))):
        return run
    return 1


def turn_completions(engine: Any, prompts: Sequence[Any], languages: Sequence[str],
                     params: SamplingParams, n: int) -> list[Completion]:  # fmt: skip
    """One completion per prompt, in order, where each run of `n` equal prompts is one prompt
    sampled n times (the engine's n: the same rows, one request where an engine batches a
    prompt's samples). One `generate` call per language of the prompts' tasks, in sorted order:
    a row's stop rule closes on a block in its own (`SamplingParams.code_language`)."""
    unique = range(0, len(prompts), n)
    out: list[Completion] = []
    for language in sorted(set(languages)):
        positions = [i for i in unique if languages[i] == language]
        stops = replace(params, code_language=language)
        made = engine.generate([prompts[i] for i in positions], stops, n=n)
        out += [replace(c, prompt_index=positions[c.prompt_index]) for c in made]
    out.sort(key=lambda c: c.prompt_index)  # stable: prompt-major, as one call gives them
    return out


def _count_runs(results: Sequence[StepResult], times: RolloutTimes) -> None:
    """Each hidden-test run a turn's grading made, into the step's execution counts."""
    for result in results:
        graded = result.info.graded
        run = None if graded is None or graded.sample.program is None else graded.sample.result
        if run is not None:
            times.latencies.append(run.wall_s)
            times.executions += 1


def episode_scored(task_index: int, task: Task, episode: Episode, discount: float,
                   scorer: RewardScorer) -> Scored:  # fmt: skip
    """One episode as the trainer learns from it. A one-turn episode's completion is the
    engine's own (its text, its finish: a stop rule's included) and its reward the scorer's,
    token credit included (the credit of its one turn, every token of the completion)."""
    trajectory = episode.trajectory
    if trajectory is None:
        raise ValueError(f"task {task.id}: an episode without token ids cannot be trained on")
    own = _segment(trajectory)  # the sequence that holds the final turn
    mask = own.policy_mask  # (T,)
    completion = Completion(
        prompt_index=0,
        text=transcript(episode),
        prompt_ids=own.prompt_ids,
        token_ids=own.token_ids,
        logprobs=own.logprobs,
        # the last turn's finish; cut by the episode's token budget, "length"
        finish="length" if episode.truncated else (episode.finishes or ("eos",))[-1],
    )
    graded = next((s.info.graded for s in reversed(episode.steps) if s.info.graded), None)
    episode_return = discounted_return(trajectory.turn_rewards, discount)
    if graded is not None:  # its token credit, where the turn was graded with its tokens' offsets
        reward = replace(graded.reward, score=episode_return,
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
    model's answers and, between them, what the environment said; a one-turn episode's answer
    as the model wrote it."""
    if len(episode.outputs) == 1 and not episode.observations:
        return episode.outputs[0]
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
    ends = []
    for lo, hi in spans:
        if hi > lo:
            ends.append(hi - 1 - start)
            continue
        policy = mask.nonzero().flatten().tolist()  # only for an empty turn: a rare case
        before = [i for i in policy if i < lo - start]
        ends.append(before[-1] if before else (policy[0] if policy else 0))
    return tuple(ends)
