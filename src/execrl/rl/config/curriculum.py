"""Task mixes and difficulty curricula: which sources and levels a step may draw from.

A `TaskMix` says, for each training task, which source of `data.train` it came from and its
difficulty level (`tasks.difficulty`: 1 easy .. 5 hardest, 0 unknown). A `Curriculum` opens
levels over the run, easiest first; the prompt sampler then draws only among open tasks:

- schedule: level k (the k-th distinct level present, easiest first) opens once the step
  reaches `opens[k]` of the run's steps (default: evenly spaced, k/K).
- pass_rate: the levels up to the easiest one whose running pass rate (the mean over its last
  `window` groups) is below `target` are open, as requirement-aware curricula do (a level is
  mastered only once a full window of its groups reached the target; easier levels stay open,
  so a level that is forgotten reopens the work there).

Levels that have opened stay open: drawing keeps revisiting easier tasks (with
`rl.prompt_sampler = "pass_rate"` mastered tasks are drawn less). Tasks of unknown difficulty
(level 0) are always open: no curriculum can place them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from execrl.tasks.difficulty import UNKNOWN

CURRICULA = ("none", "schedule", "pass_rate")


@dataclass(frozen=True)
class TaskMix:
    """Where each training task came from (index = the task's index in the training set)."""

    names: tuple[str, ...]  # one per source, as logged: source/<name>/...
    weights: tuple[float, ...]  # each source's share of draws (any positive scale)
    source_of: tuple[int, ...]  # task index -> source index
    level_of: tuple[int, ...]  # task index -> difficulty level (0: unknown)

    def __post_init__(self) -> None:
        if len(self.names) != len(self.weights) or len(self.source_of) != len(self.level_of):
            raise ValueError("TaskMix: one weight per source and one level per task")

    @classmethod
    def single(cls, n_tasks: int, name: str = "train", levels: Sequence[int] = ()) -> TaskMix:
        return cls((name,), (1.0,), (0,) * n_tasks, tuple(levels) or (UNKNOWN,) * n_tasks)

    def levels(self) -> tuple[int, ...]:
        """The distinct known levels present, easiest first."""
        return tuple(sorted(set(self.level_of) - {UNKNOWN}))


@dataclass
class Curriculum:
    mode: str  # schedule | pass_rate
    levels: tuple[int, ...]  # the distinct known levels present, easiest first
    total_steps: int
    opens: tuple[float, ...] = ()  # schedule: fraction of total_steps at which each level opens
    target: float = 0.7  # pass_rate: a level is mastered at this running pass rate
    window: int = 16  # pass_rate: groups in a level's running pass rate
    recent: dict[int, list[float]] = field(default_factory=dict)  # level -> last group rates

    def __post_init__(self) -> None:
        if self.mode not in CURRICULA[1:]:
            raise ValueError(f"curriculum {self.mode!r}; choose one of {', '.join(CURRICULA)}")
        if not self.opens:
            self.opens = tuple(k / len(self.levels) for k in range(len(self.levels)))

    def open_level(self, step: int) -> int | None:
        """The hardest open level at 0-based `step`; None when no task has a known level."""
        if not self.levels:
            return None
        if self.mode == "schedule":
            frac = step / max(1, self.total_steps)
            opened = [lv for lv, at in zip(self.levels, self.opens, strict=True) if frac >= at]
            return opened[-1] if opened else self.levels[0]
        for level in self.levels:
            if not self.mastered(level):
                return level
        return self.levels[-1]

    def mastered(self, level: int) -> bool:
        rates = self.recent.get(level, [])
        return len(rates) >= self.window and sum(rates) / len(rates) >= self.target

    def running_pass_rate(self, level: int) -> float | None:
        rates = self.recent.get(level, [])
        return sum(rates) / len(rates) if rates else None

    def observe(self, level: int, pass_rate: float) -> None:
        """One group of a task at `level` finished with `pass_rate`."""
        if level == UNKNOWN or self.mode != "pass_rate":
            return
        rates = self.recent.setdefault(level, [])
        rates.append(pass_rate)
        del rates[: -self.window]

    def state_dict(self) -> dict[str, Any]:
        return {"recent": {k: list(v) for k, v in self.recent.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.recent = {int(k): [float(x) for x in v] for k, v in state["recent"].items()}
