"""Which prompts to sample: pass-rate control, and DAPO's dynamic-sampling filter.

Pass-rate control: each task keeps an exponential average of its recent pass rate; tasks are
drawn without replacement with weight 1 - |p - target| / max(target, 1 - target) (floored), so
groups near the target pass rate (0.5: the most informative for group baselines) dominate.
Unseen tasks count as being at the target, so every task gets tried.

With several sources (`data.train` with `data.weights`, a `TaskMix`) each draw first picks a
source by its weight among those with an open task left, then a task of it as above, so each
source's share of draws is its weight's share whatever its tasks' pass rates. A `Curriculum`
limits the draws of a step to the tasks whose difficulty level is open (`data.curriculum`); when
they are fewer than the step needs, the next level's tasks fill it.

Everything here is a function of the seed and of what `update` was told, so every process draws
the same tasks, and `state_dict` holds all of it for `--resume`.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from execrl.rl.config.curriculum import Curriculum, TaskMix

_FLOOR = 0.05  # even solved or hopeless tasks come back now and then: pass rates drift


@dataclass
class PromptSampler:
    n_tasks: int
    seed: int
    mode: str = "pass_rate"  # pass_rate | uniform
    target: float = 0.5
    decay: float = 0.5
    mix: TaskMix | None = None  # sources and levels of the tasks; None: one source
    curriculum: Curriculum | None = None  # None: every level open
    pass_rate: dict[int, float] = field(default_factory=dict)  # task index -> running pass rate
    # Steps begun. A draw that excludes nothing opens a step: `groups.gather` excludes the tasks
    # already drawn in every refill round of a step, and nothing in its first
    steps: int = 0
    open_level: int | None = None  # the curriculum's hardest open level for this step
    rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        if self.n_tasks < 1:
            raise ValueError("the task set is empty: no tasks to train on")
        if self.mix is not None and len(self.mix.source_of) != self.n_tasks:
            raise ValueError(
                f"the task mix has {len(self.mix.source_of)} tasks, not {self.n_tasks}"
            )
        self.rng = random.Random(self.seed)

    def weight(self, task: int) -> float:
        if self.mode == "uniform":
            return 1.0
        p = self.pass_rate.get(task, self.target)
        width = max(self.target, 1 - self.target) or 1.0
        return max(_FLOOR, 1 - abs(p - self.target) / width)

    def draw(self, k: int, exclude: Sequence[int] = ()) -> list[int]:
        """k distinct task indices (fewer if the set is smaller), weighted, without replacement:
        from the open levels, and when they hold fewer than k tasks, the rest from the next
        level up (then the next), so a curriculum orders the work without shrinking the batch."""
        excluded = set(exclude)
        if not excluded:
            self.steps += 1
            if self.curriculum is not None:
                self.open_level = self.curriculum.open_level(self.steps - 1)
        chosen: list[int] = []
        for pool in self._pools(excluded):
            chosen += self._draw_from(pool, k - len(chosen))
            if len(chosen) >= k:
                break
        return chosen

    def _pools(self, excluded: set[int]) -> list[list[int]]:
        """The tasks not excluded: the open ones, then each closed level's, easiest first."""
        tasks = [i for i in range(self.n_tasks) if i not in excluded]
        if self.open_level is None or self.mix is None:
            return [tasks]
        level_of, top = self.mix.level_of, self.open_level
        above = sorted({level_of[i] for i in tasks if level_of[i] > top})
        return [[i for i in tasks if level_of[i] <= top]] + [  # unknown (0) is always open
            [i for i in tasks if level_of[i] == level] for level in above
        ]

    def _draw_from(self, pool: list[int], k: int) -> list[int]:
        """With several sources, a source by its weight among those with a task in `pool`,
        then one of its tasks by `weight`; with one, a task by `weight` (no source draw)."""
        several = self.mix is not None and len(self.mix.names) > 1
        by_source: dict[int, tuple[list[int], list[float]]] = {}  # source -> tasks, weights
        for i in pool:
            tasks, weights = by_source.setdefault(self.mix.source_of[i] if several else 0, ([], []))
            tasks.append(i)
            weights.append(self.weight(i))
        chosen: list[int] = []
        while len(chosen) < k and by_source:
            live = sorted(by_source)
            source = live[0] if len(live) == 1 else self.rng.choices(
                live, weights=[self.mix.weights[s] for s in live])[0]  # fmt: skip
            tasks, weights = by_source[source]
            j = self.rng.choices(range(len(tasks)), weights=weights)[0]
            chosen.append(tasks.pop(j))
            weights.pop(j)
            if not tasks:
                del by_source[source]
        return chosen

    def update(self, task: int, pass_rate: float) -> None:
        old = self.pass_rate.get(task)
        self.pass_rate[task] = (
            pass_rate if old is None else self.decay * old + (1 - self.decay) * pass_rate
        )
        if self.curriculum is not None and self.mix is not None:
            self.curriculum.observe(self.mix.level_of[task], pass_rate)

    def state_dict(self) -> dict[str, Any]:
        state = {"pass_rate": dict(self.pass_rate), "rng": self.rng.getstate(),
                 "steps": self.steps}  # fmt: skip
        if self.curriculum is not None:
            state["curriculum"] = self.curriculum.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.pass_rate = {int(k): float(v) for k, v in state["pass_rate"].items()}
        self.rng.setstate(state["rng"])
        self.steps = int(state.get("steps", 0))  # checkpoints before curricula had no count
        if self.curriculum is not None:
            self.curriculum.load_state_dict(state.get("curriculum", {"recent": {}}))


def informative(rewards: Sequence[float], valid: Sequence[bool]) -> bool:
    """DAPO dynamic sampling (Yu et al. 2025, eq. 11): keep a group only when its valid rewards
    are not all equal (all-equal groups have zero advantage and only dilute the batch)."""
    values = [r for r, v in zip(rewards, valid, strict=True) if v]
    return len(values) >= 2 and max(values) > min(values)
