"""Running episodes: each turn, every episode still going gets one completion from the engine
(one batched `generate` call), the environment steps on it, and its turn is appended.

`TurnLoop` holds a batch of episodes between turns; `play_out` drives it to the end. With a
token engine (`models.engines.engine.RolloutEngine`: local models, scripted test policies) each
episode is a `Conversation` of token ids and ends as a token-exact trajectory (`run_episodes`); a
text-only model (an OpenAI-compatible server, `TextReplies`) goes through the same loop with a
`TextConversation`, which keeps the texts alone, since a server's tokens are not ours. The
training's episode source (`rl.rollout.episode_sources.EnvSource`, every environment's, "single"
included) and `execrl eval --env` both run their episodes here.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol, runtime_checkable

import torch

from execrl.rl.episodes.env import Environment, PolicyTurn, StepResult, StepsTogether
from execrl.rl.episodes.trajectory import Conversation, TextConversation, TextPrompt, Trajectory
from execrl.tasks.schema import Task


@dataclass(frozen=True, slots=True)
class Episode:
    task_id: str
    outputs: tuple[str, ...]  # the model's turns, as text
    observations: tuple[str, ...]  # the environment's turns after the first (feedback, tools)
    steps: tuple[StepResult, ...]  # one per model turn
    trajectory: Trajectory | None  # None for a text-only generator
    truncated: bool = False  # stopped by the token budget, not by the environment
    finishes: tuple[str, ...] = ()  # each model turn's finish reason ("eos", "stop", "length")
    # A harness that rewrote its history: its other segments, each a token-exact sequence of its
    # own (`trajectory` is the one holding the last call); what training makes of them:
    # `TrainConfig.segment_training`
    segments: tuple[Trajectory, ...] = ()

    @property
    def masked(self) -> bool:
        """The final grade was a sandbox failure: leave the episode out of the advantage."""
        return bool(self.steps) and self.steps[-1].info.masked

    def passed_by_turn(self, turns: int) -> list[bool]:
        """Whether the answer standing after each of `turns` turns passes the hidden tests (an
        episode that ended early keeps its last answer)."""
        graded = [s.info.hidden_passed for s in self.steps]
        out, last = [], False
        for t in range(turns):
            if t < len(graded) and graded[t] is not None:
                last = bool(graded[t])
            out.append(last)
        return out


@runtime_checkable
class GroupRewarded(Protocol):
    """An environment some of whose rewards depend on the other episodes of the group (the
    episodes of one task): `finish_group` gets the group's finished episodes, in order, and
    returns them with those rewards set, in their turns and trajectories alike (coder_tester:
    the tester's reward is what its tests catch among the group's coders)."""

    def finish_group(self, task: Task, episodes: Sequence[Episode]) -> list[Episode]: ...


def finish_groups(env: Environment, tasks: Sequence[Task], episodes: Sequence[Episode],
                  groups: Sequence[Hashable]) -> list[Episode]:  # fmt: skip
    """`episodes` (one per entry of `tasks`) with the members of each group (the episodes whose
    entries of `groups` are equal: a GRPO group, or a task's samples) finished together by
    `env` when it is `GroupRewarded`; the order is kept. Else the episodes as they are."""
    if not isinstance(env, GroupRewarded):
        return list(episodes)
    out = list(episodes)
    members: dict[Hashable, list[int]] = {}
    for i, group in enumerate(groups):
        members.setdefault(group, []).append(i)
    for indices in members.values():
        finished = env.finish_group(tasks[indices[0]], [episodes[i] for i in indices])
        for i, episode in zip(indices, finished, strict=True):
            out[i] = episode
    return out


def standing_after(passed: Sequence[bool], turns: int) -> list[bool]:
    """`passed` (one per turn an episode took) over `turns` turns: an episode that ended early
    keeps its last answer; one that took no turn passes nothing."""
    return [bool(passed[min(t, len(passed) - 1)]) if passed else False for t in range(turns)]


def run_episodes(
    make: Callable[[], Environment],
    tasks: Sequence[Task],
    engine: Any,
    tokenizer: Any,
    params: Any,
    *,
    chat: bool,
    max_tokens: int = 0,
    parallel: int = 8,
) -> list[Episode]:
    """One episode per task (repeat a task for a group) with a token engine, every turn
    generated and stepped (`TurnLoop`) until each episode is done."""
    conversation = partial(Conversation, tokenizer, chat)
    loop = TurnLoop(make, tasks, conversation, max_tokens=max_tokens, parallel=parallel,
                    tokenizer=tokenizer)  # fmt: skip
    return play_out(loop, engine, params)


def play_out(loop: TurnLoop, engine: Any, params: Any) -> list[Episode]:
    """The loop's episodes, one turn of all those still going after another, to the end."""
    while loop.active:
        loop.step(engine.generate(loop.prompts(), params, n=1))
    return loop.episodes()


class TurnLoop:
    """Episodes of `tasks` (one each), a turn at a time: `prompts()` are the next prompts of the
    episodes still going (`active`), `step(completions)` gives them to the environments; each
    episode's turns are kept by a `conversation()` (token ids, or a text model's texts).
    `max_tokens` > 0 caps each episode's whole trajectory; an episode past it stops, truncated,
    with reward 0 for its last turn. The environments of a turn step together where their class
    says so (`StepsTogether`: one call for the turn), else concurrently, `parallel` at a time
    (each is its own object; their sandbox runs go to the pool's workers). `tokenizer` decodes
    a token engine's turns for the environments that read their tokens (None: a text model).
    Generating and stepping are separate calls so that the rollouts of one chunk can step while
    the engine generates another's (`rl.rollout.rollouts`)."""

    def __init__(self, make: Callable[[], Environment], tasks: Sequence[Task],
                 conversation: Callable[[], Conversation | TextConversation], *,
                 max_tokens: int = 0, parallel: int = 8,
                 tokenizer: Any = None) -> None:  # fmt: skip
        self.tasks, self.max_tokens, self.tokenizer = tasks, max_tokens, tokenizer
        self.envs = [make() for _ in tasks]
        self._step_all = _stepping(self.envs, parallel)  # chosen once, for every turn
        self.convs = [conversation() for _ in tasks]
        zipped = zip(self.convs, self.envs, tasks, strict=True)
        self._prompts = [c.start(e.reset(t)) for c, e, t in zipped]
        self.outputs: list[list[str]] = [[] for _ in tasks]
        self.seen: list[list[str]] = [[] for _ in tasks]
        self.steps: list[list[StepResult]] = [[] for _ in tasks]
        self.truncated = [False] * len(tasks)
        self.finishes: list[list[str]] = [[] for _ in tasks]
        self.active = list(range(len(tasks)))

    def prompts(self) -> list[list[int]] | list[TextPrompt]:
        return [self._prompts[i] for i in self.active]

    def step(self, completions: Sequence[Any]) -> list[StepResult]:
        """The active episodes' turns (one completion each, in `active` order); what each
        environment's step returned, in that order."""
        active = self.active
        turns = [PolicyTurn(d.text, d.token_ids.tolist(), self.tokenizer) for d in completions]
        results = self._step_all([self.envs[i] for i in active], turns)
        still = []
        for i, done, turn, result in zip(active, completions, turns, results, strict=True):
            conv = self.convs[i]
            conv.add_policy(turn.token_ids, done.logprobs.tolist(), done.text)
            self.outputs[i].append(done.text)
            self.finishes[i].append(done.finish)
            self.steps[i].append(result)
            over = self.max_tokens > 0 and len(conv.ids) >= self.max_tokens
            conv.add_reward(0.0 if over and not result.done else result.reward)
            if result.done or result.observation is None:
                continue
            if over:
                self.truncated[i] = True
                continue
            self.seen[i].append(result.observation.text)
            self._prompts[i] = conv.add_env(result.observation)
            still.append(i)
        self.active = still
        return results

    def episodes(self) -> list[Episode]:
        return [
            Episode(t.id, tuple(o), tuple(s), tuple(st), c.trajectory(), tr, tuple(f))
            for t, o, s, st, c, tr, f in zip(
                self.tasks,
                self.outputs,
                self.seen,
                self.steps,
                self.convs,
                self.truncated,
                self.finishes,
                strict=True,
            )  # fmt: skip
        ]


StepAll = Callable[[list[Environment], list[PolicyTurn]], list[StepResult]]


def _stepping(envs: Sequence[Environment], parallel: int) -> StepAll:
    """How a turn's environments step: together, in one call, where their class says so
    (`StepsTogether`), else each on its own, `parallel` at a time."""
    if envs and isinstance(envs[0], StepsTogether):
        return type(envs[0]).step_together  # type: ignore[return-value]
    return partial(_step_each, parallel)


def _step_each(parallel: int, envs: list[Environment], turns: list[PolicyTurn]) -> list[StepResult]:
    with ThreadPoolExecutor(max(1, min(parallel, len(envs)))) as pool:
        return list(pool.map(lambda env, turn: env.step(turn.text), envs, turns))


@dataclass(frozen=True, slots=True)
class TextCompletion:
    """A text-only model's answer: no token ids or log-probs (a server's tokens are not ours),
    and no finish reason ("": not known)."""

    text: str
    token_ids: torch.Tensor = field(default_factory=lambda: torch.zeros(0, dtype=torch.long))
    logprobs: torch.Tensor = field(default_factory=lambda: torch.zeros(0))
    finish: str = ""


class TextReplies:
    """A text-only model as the turn loop's engine: `reply(raw_texts, chat_messages)` gives one
    answer per conversation (the raw text for completion servers, the messages for chat
    servers)."""

    def __init__(self, reply: Callable[[list[str], list[list[dict[str, str]]]], list[str]]) -> None:
        self.reply = reply

    def generate(
        self, prompts: Sequence[TextPrompt], params: Any, n: int = 1
    ) -> list[TextCompletion]:
        answers = self.reply([p.raw for p in prompts], [p.messages for p in prompts])
        return [TextCompletion(text) for text in answers]
