"""How a trained model is evaluated, saved with it: `execrl eval --model RUN/final` evaluates a
checkpoint exactly as its run's held-out evaluation did.

A checkpoint evaluates as it trained only if everything between the task and the verdict is the
same: the tasks, the prompt format (signature prompts turn a prose request into code the model
continues: `models.prompting.prompting`), the chat template, the sampling settings and seeds, how a
completion becomes a program, and the limits. `execrl train` writes all of it next to the
model, in `final/execrl_eval.json` (`HeldoutSpec`); `execrl eval --model DIR` reads it and runs
`run_heldout`, which samples and scores as training's held-out evaluation does: the rollout
engine, the rollout chunking and seeds (`rl.rollout.rollouts.Rollouts`, step -1) and the rewards
layer's one scoring path with the `pass` reward. Without that file a model is evaluated the way the
benchmark's official harness prompts it (`eval.generation`), right for a model execrl did not train.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from execrl.models.engines.engine import RolloutEngine
from execrl.models.engines.sampling import SamplingParams
from execrl.models.prompting.chat import chat_wanted
from execrl.models.prompting.prompting import with_named_entry_points, with_signature_prompts
from execrl.rewards.scoring.config import RewardConfig
from execrl.rewards.scoring.scorer import RewardScorer
from execrl.rl.config.config import TrainConfig
from execrl.rl.episodes.env import EnvConfig
from execrl.rl.rollout.episode_sources import episode_source
from execrl.rl.rollout.rollouts import Rollouts, RolloutTimes
from execrl.rl.rollout.scored import Scored
from execrl.sandbox import Limits, SandboxConfig
from execrl.tasks.limit_caps import capped
from execrl.tasks.schema import Task

SPEC_FILE = "execrl_eval.json"
PROMPT_FORMATS = ("signature", "plain")
HELDOUT_SEED_OFFSET = 7919  # held-out sampling seeds differ from the training rollouts'


@dataclass(frozen=True, slots=True)
class HeldoutSpec:
    """How a model is evaluated on held-out tasks; saved with the model it describes."""

    benchmark: str  # the tasks, as `load_benchmark` names them (synthetic:split=test,n=64,...)
    limit: int  # only the first N tasks (0: all)
    prompt_format: str  # "signature" (prose prompts end with the entry point's def) | "plain"
    chat: str  # auto | on | off: the chat template
    temperature: float
    top_p: float
    max_new_tokens: int
    stop: tuple[str, ...]
    samples_per_task: int  # pass@1 = the mean pass over these
    seed: int  # the run's seed; each chunk's sampling seed derives from it
    groups_per_generate: int  # tasks per generate call: the unit of seeding
    program: str  # how a completion becomes a program (`[reward] program`: auto | extract | ...)
    # each program's run: the run's [sandbox.limits], for its own held-out tasks; None: each
    # task's own (its benchmark's harness's), as on another task set (`eval.as_trained`)
    limits: Limits | None
    dtype: str  # the dtype the model was trained in
    engine: str = "loop"  # the rollout engine (`sampling.engine`): loop and hf draw differently
    # the stop rules (`sampling.code_end`, `sampling.repeat_ngram`); off in a spec saved before
    code_end: bool = False
    repeat_ngram: int = 0

    def __post_init__(self) -> None:
        if self.prompt_format not in PROMPT_FORMATS:
            raise ValueError(
                f"prompt_format = {self.prompt_format!r}; choose one of {', '.join(PROMPT_FORMATS)}"
            )
        if self.samples_per_task < 1 or self.groups_per_generate < 1:
            raise ValueError("samples_per_task and groups_per_generate must be >= 1")

    def save(self, directory: str | Path) -> Path:
        path = Path(directory) / SPEC_FILE
        path.write_text(json.dumps(dataclasses.asdict(self), indent=1) + "\n")
        return path

    @classmethod
    def load(cls, directory: str | Path) -> HeldoutSpec | None:
        """The spec saved in a model directory, or None when there is none (a model execrl did
        not train). A damaged file is an error naming it, never a silent fallback."""
        path = Path(directory) / SPEC_FILE
        if not path.is_file():
            return None
        try:
            data = json.loads(path.read_text())
            data["stop"] = tuple(data["stop"])
            data["limits"] = _saved_limits(data, path)
            return cls(**data)
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(
                f"{path}: not a held-out evaluation spec ({exc}); delete it to evaluate the "
                "model as the benchmark's harness prompts it"
            ) from None


def _saved_limits(data: dict[str, Any], path: Path) -> Limits | None:
    """A spec's limits: its `limits` object, or in a spec saved before [sandbox.limits], the
    `wall_s` and `memory_mb` it kept (the other limits were the defaults then); capped, as every
    limit a file gives (`tasks.limit_caps`: a model directory can come from anyone)."""
    if "limits" in data and data["limits"] is None:
        return None  # each task's own limits
    if "limits" in data:
        given = dict(data["limits"])
    else:
        given = {"wall_s": data.pop("wall_s"), "memory_mb": data.pop("memory_mb")}
    return Limits(**capped(given, where=f"{path} limits", say=_say))


def _say(message: str) -> None:
    print(message, file=sys.stderr)


def heldout_spec(c: TrainConfig) -> HeldoutSpec:
    """What `execrl train` evaluates its held-out tasks with (`data`, `sampling`, `reward`)."""
    if c.data.heldout == "synthetic":
        benchmark = (
            f"synthetic:split=test,n={c.data.n_heldout},difficulty={c.data.difficulty},"
            f"seed={c.run.seed}"
        )
    else:
        benchmark = c.data.heldout
    return HeldoutSpec(
        benchmark=benchmark,
        limit=c.data.n_heldout,
        prompt_format="signature" if c.data.signature_prompt else "plain",
        chat=c.model.chat,
        temperature=c.sampling.heldout_temperature,
        top_p=1.0,
        max_new_tokens=c.sampling.max_new_tokens,
        stop=tuple(c.sampling.stop),
        samples_per_task=c.data.heldout_samples,
        seed=c.run.seed,
        groups_per_generate=c.sampling.groups_per_generate,
        program=c.reward.program,
        limits=c.sandbox.limits,
        dtype=c.model.dtype,
        engine=c.sampling.engine,
        code_end=c.sampling.code_end,
        repeat_ngram=c.sampling.repeat_ngram,
    )


def prompted(tasks: Sequence[Task], prompt_format: str) -> list[Task]:
    """The tasks with the prompt format applied, each naming its entry point (idempotent: a
    signature prompt is code, a named prompt is left as it is)."""
    tasks = with_signature_prompts(list(tasks)) if prompt_format == "signature" else list(tasks)
    return with_named_entry_points(tasks)


def run_heldout(
    spec: HeldoutSpec,
    engine: RolloutEngine,
    tokenizer: Any,
    tasks: Sequence[Task],
    sandbox: Any,
    chunks: Sequence[int] | None = None,
    env: EnvConfig | None = None,
) -> list[Scored]:
    """`spec.samples_per_task` completions of each task in the given rollout chunks (of
    `groups_per_generate` tasks; all by default), sampled and scored as training's held-out
    evaluation does; task-major. `x.passed` is the verdict pass@1 averages. Each is an episode
    of `env` ("single", one turn, by default); `x.turns.passed_by_turn` has each turn's."""
    tasks = prompted(tasks, spec.prompt_format)
    chat = chat_wanted(spec.chat)
    env = env or EnvConfig()  # "single": one turn
    params = SamplingParams(spec.temperature, spec.top_p, spec.max_new_tokens, spec.stop,
                            code_end=spec.code_end,  # where env's turns allow it
                            repeat_ngram=spec.repeat_ngram)  # fmt: skip
    reward = RewardConfig(tree={"type": "pass"}, program=spec.program, analysis_workers=0)
    box = SandboxConfig(limits=spec.limits) if spec.limits is not None else None
    scorer = RewardScorer(reward, sandbox=sandbox, sandbox_config=box, task_limits=box is None)
    # graded, not trained: a harness's rewritten history is no reason to mask an episode
    source = episode_source(env, engine, tokenizer, tasks, scorer, params, chat, segments="last")
    rollouts = Rollouts(source, spec.seed + HELDOUT_SEED_OFFSET, spec.groups_per_generate)
    try:
        every = rollouts.chunks(list(range(len(tasks))))
        mine = range(len(every)) if chunks is None else chunks
        done = rollouts.run(
            [(i, every[i]) for i in mine], spec.samples_per_task, -1, 0, RolloutTimes()
        )
    finally:
        rollouts.close()
        scorer.close()
    return [x for i in mine for group in done[i] for x in group]
