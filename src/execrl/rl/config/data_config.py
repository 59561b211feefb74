"""The `[data]` of a run: which tasks it trains and is held out on, and the curriculum over
them; its fields documented once here, and checked when the config loads (`check_data`), before
any task or model loads."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from execrl.rl.files.toml_config import ConfigError


@dataclass
class DataConfig:
    # Task sources, one (a string) or several (a list): synthetic | a benchmark name, with its
    # options where it takes them (synthetic:difficulty=mixed,n=400; sql:split=train) | a
    # contest file NAME:PATH (apps:PATH, ...) | jsonl:PATH. A task id that two sources share is
    # prefixed with its source's name (`mbpp/12`); each source is logged as source/<name>/...,
    # its name the spec with any path cut to the file name
    train: list[str] = field(default_factory=lambda: ["synthetic"])
    # Each source's share of draws, in data.train's order ([]: equal shares), whatever its
    # tasks' pass rates; a source with no open task (curriculum) lends its share to the others
    weights: list[float] = field(default_factory=list)
    heldout: str = "synthetic"  # held-out tasks for pass@1 before and after ("" skips)
    difficulty: int = 1  # synthetic suite: the difficulty of the training and held-out tasks
    n_train: int = 800  # synthetic suite: tasks generated; other sources: at most this many each
    # Difficulty curriculum (`execrl.rl.config.curriculum`; levels 1 easy .. 5 hardest, as
    # `execrl.tasks.difficulty` maps each dataset's labels; tasks without one are level 0 and
    # always open): none | schedule (levels open one after another over run.steps) | pass_rate
    # (the levels up to the easiest whose running pass rate is below curriculum_target are
    # open). Open levels stay open; a step they cannot fill takes the next level's tasks
    curriculum: str = "none"
    # schedule: for each level present, easiest first, the fraction of run.steps at which it
    # opens (the first 0); []: evenly spaced, the k-th of K levels at k/K. A resume that
    # extends run.steps stretches the schedule with it
    curriculum_opens: list[float] = field(default_factory=list)
    curriculum_target: float = 0.7  # pass_rate: a level is mastered at this running pass rate
    curriculum_window: int = 16  # pass_rate: a level's running pass rate is over its last groups
    n_heldout: int = 64
    heldout_samples: int = 4  # samples per held-out task (pass@1 = mean pass over them)
    # End prose prompts with the entry point's `def` line (from the reference), so the model
    # writes the body instead of retyping the name (`execrl.models.prompting.prompting`)
    signature_prompt: bool = True


def check_data(data: DataConfig, where: str) -> None:
    """data.train's sources and weights, and the curriculum's numbers (the levels present are
    known once the tasks load: `rl.setup` checks data.curriculum_opens against them)."""
    if not data.train:
        raise ConfigError(f"{where}: data.train is empty; name at least one task source")
    for i, source in enumerate(data.train):
        key = "data.train" if len(data.train) == 1 else f"data.train[{i}]"
        if not source:
            raise ConfigError(f"{where}: {key} is empty; name a task source")
        _check_source(key, source, where)
    twice = sorted({s for s in data.train if data.train.count(s) > 1})
    if twice:
        raise ConfigError(
            f"{where}: data.train names {twice[0]!r} twice; name it once and give it a larger "
            "share in data.weights"
        )
    _check_source("data.heldout", data.heldout, where)
    if data.weights and len(data.weights) != len(data.train):
        raise ConfigError(
            f"{where}: data.weights has {len(data.weights)} entries for {len(data.train)} "
            "sources in data.train; give one weight per source, or none for equal shares"
        )
    if any(not 0 < w < math.inf for w in data.weights):
        raise ConfigError(f"{where}: data.weights must be positive numbers, got {data.weights}")
    opens = data.curriculum_opens
    if opens and data.curriculum != "schedule":
        raise ConfigError(
            f"{where}: data.curriculum_opens is for data.curriculum = 'schedule' "
            f"(it is {data.curriculum!r}); remove it or set the schedule"
        )
    if opens and (opens[0] != 0 or opens != sorted(opens) or opens[-1] > 1):
        raise ConfigError(
            f"{where}: data.curriculum_opens = {opens}: fractions of run.steps from 0 to 1, "
            "non-decreasing, the first 0 (the easiest level is open from the start)"
        )
    if not 0 <= data.curriculum_target <= 1:
        raise ConfigError(f"{where}: data.curriculum_target must be in [0, 1]")
    if data.curriculum_window < 1:
        raise ConfigError(f"{where}: data.curriculum_window must be at least 1")


def _check_source(key: str, source: str, where: str) -> None:
    """A task source names the synthetic suite, a registered benchmark, a verifier suite with
    its options (sql:split=test,n=4), a contest benchmark with its path, or jsonl:PATH."""
    from execrl.tasks.catalog.registry import BENCHMARKS, is_path_benchmark, known_sources
    from execrl.tasks.errors import UnknownBenchmark
    from execrl.tasks.suites import is_suite, parse_options

    if source in ("", "synthetic") or source.startswith(("synthetic:", "jsonl:")):
        return
    if is_path_benchmark(source) or source in BENCHMARKS:
        return
    if is_suite(source):
        try:
            parse_options(source)
        except UnknownBenchmark as e:
            raise ConfigError(f"{where}: {key}: {e}") from None
        return
    raise ConfigError(f"{where}: {key} = {source!r} is not a task source; known: {known_sources()}")
