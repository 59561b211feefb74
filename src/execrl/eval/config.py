"""What an evaluation run is asked to do: `execrl eval`'s flags as one typed record
(`EvalConfig`), whose fields carry the flags' argparse names. It is checked when made, so a
setting that cannot work is an error naming its flag and what to give, before any model loads;
what only a model or its benchmark can tell (a trained model's saved -n, the engine it needs) is
checked by the run (`eval.run`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from execrl.models.device import device_problem
from execrl.models.engines.backends import OPENAI_PREFIX
from execrl.models.engines.sampling import out_of_range
from execrl.rl.episodes.env import ONE_TURN, is_one_turn


class EvalError(Exception):
    """An evaluation that cannot go on for a reason a person can fix, said in one line."""


class EvalConfigError(EvalError, ValueError):
    """A setting of the evaluation that cannot work, named by its flag."""


@dataclass(frozen=True)
class EvalConfig:
    """One evaluation. None: the default, or for a model execrl trained, what its run used
    (`eval.as_trained`)."""

    model: str  # a model directory, a hub id, 'default' or openai:URL#MODEL
    benchmark: str | None = None  # None: humaneval, or a trained model's held-out tasks
    n: int | None = None  # samples per task
    k: str = "1"  # pass@k's k to print, comma-separated, as given (its errors quote it)
    temperature: float | None = None
    top_p: float | None = None
    max_new_tokens: int | None = None
    repeat_ngram: int | None = None
    chat: str | None = None  # auto, on or off
    device: str = "auto"
    engine: str | None = None  # loop, hf or vllm
    prompt: str | None = None  # a prompt style (`eval.prompt_style`)
    dtype: str | None = None
    # sequences per generate call; None: 64 with vLLM, which batches a whole call's sequences
    # at each decoding step, else 16
    batch_size: int | None = None
    seed: int | None = None
    limit: int = 0  # only the first N tasks (0: all)
    out_dir: Path | None = None  # None: evals/BENCH__MODEL (`out_dir_for`)
    restart: bool = False  # discard samples from an earlier run
    workers: int = 2  # sandbox workers
    threads: int = 0  # torch's CPU threads (0: chosen at start)
    timeout: float | None = None  # wall-clock seconds per sample; None: the benchmark's
    data_dir: str | None = None
    json: bool = False  # print the summary as JSON, last
    allow_weaker_sandbox: bool = False
    env: str = ONE_TURN  # episodes: docs/episodes.md
    turns: int = 2
    feedback: str = "full"
    corrections: bool = False
    ks: tuple[int, ...] = field(init=False, default=())  # `k` read, for one-turn evaluations

    def __post_init__(self) -> None:
        if self.batch_size is None:
            object.__setattr__(self, "batch_size", 64 if self.engine == "vllm" else 16)
        problem = _problem(self)
        if problem:
            raise EvalConfigError(problem)
        if is_one_turn(self.env):  # episodes report pass@1 by turn: -k is not theirs
            object.__setattr__(self, "ks", _ks(self.k))

    def out_dir_for(self, *names: str) -> Path:
        """--out-dir, else evals/ and a directory named by `names` (benchmark, model...)."""
        if self.out_dir:
            return self.out_dir
        return Path("evals") / re.sub(r"[^\w.+-]+", "_", "__".join(names)).strip("_")[:120]


def _problem(c: EvalConfig) -> str | None:
    """What is wrong with the flags, in the order `execrl eval` has always checked them."""
    sampling = out_of_range(temperature=c.temperature, top_p=c.top_p)
    if sampling is not None:
        name, value, rule = sampling
        return f"--{name.replace('_', '-')} {value}: {rule}"
    device = device_problem(c.device)
    if device:
        return f"--device {device}"
    if c.threads < 0:
        return f"--threads {c.threads}: give 0 (chosen at start) or a positive count"
    if c.corrections and is_one_turn(c.env):
        return "--corrections needs episodes with feedback: add --env self_correct"
    if c.corrections and c.model.startswith(OPENAI_PREFIX):
        return "--corrections needs a local model: a server's token ids are not ours"
    if not is_one_turn(c.env) and c.prompt is not None:
        return f"--prompt {c.prompt} with --env {c.env}: episodes prompt as training does"
    if is_one_turn(c.env) and c.repeat_ngram is not None and c.repeat_ngram < 0:
        return f"--repeat-ngram {c.repeat_ngram}: give 0 (off) or a token count"
    return None


def _ks(k: str) -> tuple[int, ...]:
    try:
        return tuple(sorted({int(x) for x in k.split(",") if x.strip()}))
    except ValueError:
        raise EvalConfigError(f"-k {k!r}: give comma-separated integers, e.g. -k 1,10") from None


def check_ks(config: EvalConfig, n: int) -> None:
    """Each k of pass@k is between 1 and n, the samples per task (known once a trained model's
    saved count is read)."""
    ks = config.ks
    if n < 1 or not ks or ks[0] < 1 or ks[-1] > n:
        raise EvalConfigError(f"-k {config.k} with -n {n}: each k must be between 1 and n")
