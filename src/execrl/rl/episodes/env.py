"""The environment interface of an episode, in the spirit of a gym.

    env = make_env(EnvConfig(name="self_correct", max_turns=2), scorer)
    observation = env.reset(task)                 # the first turn: the task's prompt
    while True:
        result = env.step(model_output)            # runs what it must in the sandbox
        if result.done:
            break
        observation = result.observation          # feedback or a tool's output

One rollout is one episode; a GRPO group is several episodes of the same task. An environment
sees text; `trajectory.Conversation` turns its observations into token ids. Built-ins: "single"
(one turn graded by the hidden tests, the default), "self_correct" and "tool" (`builtin.py`,
`tool.py`); a user's own is named "package.module:Class" and built as `Class(config, scorer)`
(docs/episodes.md). An environment whose turns are best graded as a batch steps its episodes
together (`StepsTogether`: "single" grades a turn's answers in one call of the scoring path).
"""

from __future__ import annotations

import importlib
import shlex
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from execrl.rewards.scoring.scorer import RewardScorer, ScoredSample
from execrl.tasks.schema import Task

if TYPE_CHECKING:  # the models layer imports torch; its record is only named here
    from execrl.models.engines.sampling import SamplingParams


@dataclass(frozen=True, slots=True)
class Observation:
    """One environment turn."""

    text: str  # the message a chat model reads (role `role`)
    # what a raw-text model (no chat template) is given instead, appended to the conversation
    raw: str
    role: str = "user"  # "user" (the task, feedback) or "tool" (a tool's output)


@dataclass(frozen=True, slots=True)
class StepInfo:
    """What a step did, for the log and for evaluation by turn; never shown to the model."""

    turn: int  # 1-based
    hidden_passed: bool | None = None  # the hidden tests on this turn's answer (None: not graded)
    visible_passed: bool | None = None  # the visible tests (None: not run)
    tool_calls: int = 0  # tool calls so far in the episode
    note: str = ""  # e.g. "no visible tests", "tool budget spent"
    # the hidden grade was a sandbox failure (never the program's fault): leave the episode out
    # of the advantage, as the scorer masks a one-turn sample
    masked: bool = False
    # the hidden grade as the one scoring path returned it (its reward components and flags
    # reach the training log); None for a turn that was not graded
    graded: ScoredSample | None = None
    # which of the environment's roles played this turn (`EnvKind.roles`; "" for an
    # environment of one role): each role's advantage is estimated over its own turns
    role: str = ""


@dataclass(frozen=True, slots=True)
class StepResult:
    observation: Observation | None  # the next turn; None when done
    reward: float  # this turn's reward
    done: bool
    info: StepInfo


@dataclass(frozen=True, slots=True)
class HarnessConfig:
    """How harness episodes run (the `env.harness*` fields of a run)."""

    harness: str  # the command, split like a shell does (no shell features: pipes, `&&`)
    harness_timeout_s: float = 300.0  # one episode's wall time; past it the harness is killed
    harness_parallel: int = 8  # episodes (harness processes) running at once
    harness_memory_mb: int = 4096  # each harness process's address space (and its /tmp's size)
    harness_processes: int = 256  # processes and threads one episode's harness may run

    def __post_init__(self) -> None:
        try:
            argv = shlex.split(self.harness)
        except ValueError as exc:
            raise ValueError(f"env.harness {self.harness!r}: cannot be split: {exc}") from None
        if not argv:
            raise ValueError('env.harness is empty: name a command, e.g. "python my_agent.py"')
        if shutil.which(argv[0]) is None:
            raise ValueError(
                f"env.harness {self.harness!r}: no program {argv[0]!r} (not on PATH, or not an "
                "executable file); name it by its path or put it on PATH"
            )
        if self.harness_timeout_s <= 0 or self.harness_parallel < 1:
            raise ValueError("env.harness_timeout_s must be > 0 and env.harness_parallel >= 1")
        if self.harness_memory_mb < 64 or self.harness_processes < 4:
            raise ValueError("env.harness_memory_mb must be >= 64 and env.harness_processes >= 4")


@dataclass(frozen=True, slots=True)
class EnvConfig:
    """The `[env]` of a run, or `execrl eval --env/--turns`."""

    # "single", "self_correct", "tool", "coder_tester" (one policy writes the tests, then the
    # function), "harness" (a user's agent program, env.harness), or "package.module:Class"
    name: str = "single"  # ONE_TURN
    # self_correct: attempts; tool: model turns (calls + the answer); coder_tester: the tester's
    # turn and the coder's attempts (3: the coder may revise once)
    max_turns: int = 2
    visible_split: int = 0  # tasks with nothing visible: show their first N tests (0: none)
    # self_correct: what a feedback turn says. "full": which visible test failed, its input,
    # what the program returned, the expected value, the exception with its line; "verdict":
    # only that the attempt failed and how (a failed visible test, or the run's verdict before
    # any test), the control that tells whether a model reads the feedback or only retries
    feedback: str = "full"
    tool_calls: int = 4  # tool: the most code executions in one episode
    tool_output_chars: int = 1000  # tool: a run's output is cut to this many characters
    # Training (`execrl train`): an episode's whole trajectory is cut at this many tokens (0:
    # no cap beyond max_turns turns of sampling.max_new_tokens); a cut episode's last turn
    # gets reward 0
    max_tokens: int = 0
    # The objective is the discounted episode return sum_k turn_discount^k r_k: each turn's
    # reward enters discounted to the episode's start (1.0: a fix at turn 2 is worth a pass at
    # turn 1; lower values prefer answers right the first time: from a correction warm-up, 1.0
    # once let RL give up the first attempt for the warm-up's surer second, README "Episodes")
    turn_discount: float = 1.0
    # self_correct: "final" gives the last turn the hidden tests' reward, earlier turns 0;
    # "improvement" gives each turn its grade minus the previous turn's (the return is the same,
    # but the turn that fixed the program holds the credit)
    turn_reward: str = "final"
    # harness: the command run once per episode against the policy server, e.g.
    # "python my_agent.py"; what it gets and how its answer is graded: docs/harness.md
    harness: str = ""
    harness_timeout_s: float = 300.0  # harness: one episode's wall time; past it, killed, masked
    harness_parallel: int = 8  # harness: episodes (harness processes) running at once
    harness_memory_mb: int = 4096  # harness: each of its processes' address space
    harness_processes: int = 256  # harness: processes and threads of one episode's harness

    @property
    def by_turn(self) -> bool:
        """Whether an episode may take several turns (every kind but one of one turn,
        `EnvKind.turns`): its figures go by turn (held-out pass@1 by turn, the log's episode/
        rows) and [credit] applies across its turns. Each turn of one that may not is the whole
        answer (`turn_sampling`; `reward.token_credit` works on it)."""
        return self.kind.turns != 1

    @property
    def most_turns(self) -> int:
        """The most policy turns one episode takes: its kind's bound, else env.max_turns."""
        return self.kind.turns or self.max_turns

    def turn_sampling(self, params: SamplingParams) -> SamplingParams:
        """`params` as this environment's turns are sampled: a code block's end stops a turn
        (`sampling.code_end`) only where the turn is the whole answer; an episode's turn may go on
        after a block (a tool call, a test the tester wrote)."""
        return replace(params, code_end=params.code_end and not self.by_turn)

    @property
    def kind(self) -> EnvKind:
        return env_kind(self.name)

    def __post_init__(self) -> None:
        if self.max_turns < 1:
            raise ValueError(f"env.max_turns must be >= 1, got {self.max_turns}")
        if self.max_tokens < 0 or not 0 < self.turn_discount <= 1:
            raise ValueError("env.max_tokens must be >= 0 and env.turn_discount in (0, 1]")
        if self.feedback not in FEEDBACK:
            raise ValueError(f"env.feedback {self.feedback!r}: choose one of {', '.join(FEEDBACK)}")
        if self.turn_reward not in TURN_REWARDS:
            raise ValueError(
                f"env.turn_reward {self.turn_reward!r}: choose one of {', '.join(TURN_REWARDS)}"
            )
        if self.visible_split < 0 or self.tool_calls < 0 or self.tool_output_chars < 1:
            raise ValueError(
                "env.visible_split and env.tool_calls must be >= 0, env.tool_output_chars >= 1"
            )
        if self.name not in BUILTIN and ":" not in self.name:
            raise ValueError(
                f"env.name {self.name!r}: choose one of {', '.join(BUILTIN)}, "
                'or name your own as "package.module:Class"'
            )
        if self.kind.runs_harness != bool(self.harness.strip()):
            raise ValueError(
                'env.name = "harness" and env.harness (the command, e.g. "python my_agent.py") '
                f"go together; got env.name = {self.name!r}, env.harness = {self.harness!r}"
            )
        if self.kind.runs_harness:
            self.harness_config()  # checks

    def harness_config(self) -> HarnessConfig:
        return HarnessConfig(self.harness, self.harness_timeout_s, self.harness_parallel,
                             self.harness_memory_mb, self.harness_processes)  # fmt: skip


@runtime_checkable
class Environment(Protocol):
    name: str

    def reset(self, task: Task) -> Observation:
        """Start an episode of `task`; the first observation (the prompt)."""
        ...

    def step(self, model_output: str) -> StepResult:
        """The model's turn, as text; the next observation, this turn's reward, done, info."""
        ...


@dataclass(frozen=True, slots=True)
class PolicyTurn:
    """A policy turn as an environment that steps its episodes together reads it: the text and,
    from a token engine, the tokens the policy wrote (a reward by length or per token reads
    them)."""

    text: str
    token_ids: list[int]  # as generated ([] from a text-only model)
    tokenizer: Any = None  # what decodes token_ids; None: a text-only model, no tokens


@runtime_checkable
class StepsTogether(Protocol):
    """An environment whose episodes step together, a turn of a batch in one call, rather than
    one `step` each on the turn loop's threads: "single" grades every answer of a turn in one
    call of the scoring path, whose sandbox runs them side by side (`episodes.turn_loop`)."""

    @staticmethod
    def step_together(envs: Sequence[Any], turns: Sequence[PolicyTurn]) -> list[StepResult]:
        """`envs` (this class's, each reset) stepped on their `turns`, in order."""
        ...


@dataclass(frozen=True, slots=True)
class EnvKind:
    """What the code that treats environments differently reads of one, rather than its name."""

    factory: str  # "module:Class", built as Class(config, scorer); a user's own: its env.name
    # The most turns an episode of this kind takes whatever env.max_turns says (0: env.max_turns
    # bounds it). A kind of one turn ("single") answers in it: nothing goes by turn
    # (`EnvConfig.by_turn`)
    turns: int = 0
    corrects: bool = False  # later turns correct a failed attempt from the visible tests' feedback
    # episodes come from a user's agent program (env.harness) calling the policy server, not
    # from an `Environment`; training logs the segments of the histories it rewrote
    runs_harness: bool = False
    # The roles its turns play (`StepInfo.role`), when one policy plays several in an episode:
    # each role's advantage is estimated over its own turns, as an episode of its own compared
    # with the same role's turns in the group's other episodes (`rl.update.batch_builder`). (): one
    roles: tuple[str, ...] = ()


ONE_TURN = "single"  # the default environment: one turn, graded by the hidden tests
# the one place that maps names to environments; built-ins load by path, as a user's own do
ENVIRONMENTS = {
    ONE_TURN: EnvKind("execrl.rl.episodes.builtin:Single", turns=1),
    "self_correct": EnvKind("execrl.rl.episodes.builtin:SelfCorrect", corrects=True),
    "tool": EnvKind("execrl.rl.episodes.tool:ToolUse"),
    "harness": EnvKind("", runs_harness=True),
    "coder_tester": EnvKind(
        "execrl.rl.episodes.coder_tester:CoderTester", roles=("tester", "coder")
    ),  # fmt: skip
}
BUILTIN = tuple(ENVIRONMENTS)


def env_kind(name: str) -> EnvKind:
    """The environment named `name`: a built-in, or a user's "package.module:Class"."""
    return ENVIRONMENTS.get(name) or EnvKind(name)


def is_one_turn(name: str) -> bool:
    """Whether the environment named `name` takes one turn (`EnvKind.turns`): `execrl eval`
    gives its pass@k through the benchmark's harness, not pass@1 by turn."""
    return env_kind(name).turns == 1


TURN_REWARDS = ("final", "improvement")
FEEDBACK = ("full", "verdict")


def make_env(config: EnvConfig, scorer: RewardScorer) -> Environment:
    """A fresh environment (one per concurrent episode)."""
    if config.kind.runs_harness:
        raise ValueError(
            'env.name = "harness" runs a program, not an environment: its episodes come from '
            "rl.episodes.harness.run_harness_episodes (execrl train)"
        )
    module_name, _, class_name = config.kind.factory.partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(
            f"env.name {config.name!r}: cannot load {class_name!r} from {module_name!r} ({exc}); "
            "is the module importable (on PYTHONPATH)?"
        ) from None
    env = cls(config, scorer)
    # once per class (a protocol's isinstance is slow, and the source makes one per episode)
    if type(env) not in _ENVIRONMENTS_SEEN:
        if not isinstance(env, Environment):
            raise ValueError(
                f"env.name {config.name!r}: {class_name} needs a `name`, reset(task) and "
                "step(model_output) (docs/episodes.md)"
            )
        _ENVIRONMENTS_SEEN.add(type(env))
    return env


_ENVIRONMENTS_SEEN: set[type] = set()  # the classes `make_env` found to be environments


def first_observation(task: Task) -> Observation:
    """The task's prompt as the first turn (raw: the prompt a base model continues)."""
    return Observation(task.prompt, task.prompt)


@dataclass(frozen=True, slots=True)
class Grade:
    reward: float  # the reward tree's score (hack penalties applied)
    passed: bool  # the hidden tests all pass
    masked: bool  # a sandbox failure: the reward means nothing
    scored: ScoredSample | None = None  # what the scorer returned

    @staticmethod
    def of(scored: ScoredSample) -> Grade:
        result = scored.sample.result
        passed = bool(result and result.passed)
        return Grade(scored.reward.score, passed, scored.reward.masked, scored)


def grade(scorer: RewardScorer, task: Task, answer: str) -> Grade:
    """An answer graded by the hidden tests through the one scoring path
    (`RewardScorer.score_samples`)."""
    return Grade.of(scorer.score_samples([task], [answer])[0])


def grade_hidden(scorer: RewardScorer, task: Task, answer: str) -> tuple[float, bool]:
    """`grade` as (reward, passed), for environments that need no more."""
    graded = grade(scorer, task, answer)
    return graded.reward, graded.passed
