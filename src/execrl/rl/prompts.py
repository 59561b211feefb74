"""Which prompts to sample: pass-rate control, and DAPO's dynamic-sampling filter.

Pass-rate control: each task keeps an exponential average of its recent pass rate; tasks are
drawn without replacement with weight 1 - |p - target| / max(target, 1 - target) (floored), so
groups near the target pass rate (0.5: the most informative for group baselines) dominate.
Unseen tasks count as being at the target, so every task gets tried.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

_FLOOR = 0.05  # even solved or hopeless tasks come back now and then: pass rates drift


@dataclass
class PromptSampler:
    n_tasks: int
    seed: int
    mode: str = "pass_rate"  # pass_rate | uniform
    target: float = 0.5
    decay: float = 0.5
    pass_rate: dict[int, float] = field(default_factory=dict)  # task index -> running pass rate
    rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        if self.n_tasks < 1:
            raise ValueError("the task set is empty: no tasks to train on")
        self.rng = random.Random(self.seed)

    def weight(self, task: int) -> float:
        if self.mode == "uniform":
            return 1.0
        p = self.pass_rate.get(task, self.target)
        width = max(self.target, 1 - self.target) or 1.0
        return max(_FLOOR, 1 - abs(p - self.target) / width)

    def draw(self, k: int, exclude: Sequence[int] = ()) -> list[int]:
        """k distinct task indices (fewer if the set is smaller), weighted, without replacement."""
        pool = [i for i in range(self.n_tasks) if i not in set(exclude)]
        chosen: list[int] = []
        weights = [self.weight(i) for i in pool]
        for _ in range(min(k, len(pool))):
            j = self.rng.choices(range(len(pool)), weights=weights)[0]
            chosen.append(pool.pop(j))
            weights.pop(j)
        return chosen

    def update(self, task: int, pass_rate: float) -> None:
        old = self.pass_rate.get(task)
        self.pass_rate[task] = (
            pass_rate if old is None else self.decay * old + (1 - self.decay) * pass_rate
        )

    def state_dict(self) -> dict[str, Any]:
        return {"pass_rate": dict(self.pass_rate), "rng": self.rng.getstate()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.pass_rate = {int(k): float(v) for k, v in state["pass_rate"].items()}
        self.rng.setstate(state["rng"])


def informative(rewards: Sequence[float], valid: Sequence[bool]) -> bool:
    """DAPO dynamic sampling (Yu et al. 2025, eq. 11): keep a group only when its valid rewards
    are not all equal (all-equal groups have zero advantage and only dilute the batch)."""
    values = [r for r, v in zip(rewards, valid, strict=True) if v]
    return len(values) >= 2 and max(values) > min(values)
