"""Length rewards: a linear penalty past a target, and DAPO's soft overlong punishment."""

from __future__ import annotations

from dataclasses import dataclass

from execrl.rewards.base import TOKENS, leaf
from execrl.rewards.result import RewardResult
from execrl.rewards.sample import Sample


def completion_length(sample: Sample, unit: str) -> int:
    if unit == "chars":
        return len(sample.completion)
    if unit != "tokens":
        raise ValueError(f"length unit must be 'tokens' or 'chars', not {unit!r}")
    if sample.n_tokens is not None:
        return sample.n_tokens
    if sample.offsets is not None:
        return len(sample.offsets)
    raise ValueError(
        f"task {sample.task.id}: a length reward in tokens needs the completion's token count; "
        'pass n_tokens= or offsets= when scoring, or set unit = "chars"'
    )


@dataclass(frozen=True)
class LengthPenalty:
    """-min(max_penalty, per_unit * max(0, length - target))."""

    name: str = "length"
    target: int = 512
    per_unit: float = 0.001
    max_penalty: float = 1.0
    unit: str = "tokens"

    @property
    def needs(self) -> frozenset[str]:
        return frozenset({TOKENS}) if self.unit == "tokens" else frozenset()

    @property
    def bounds(self) -> tuple[float, float]:
        return (-self.max_penalty, 0.0)

    def __call__(self, sample: Sample) -> RewardResult:
        over = max(0, completion_length(sample, self.unit) - self.target)
        return leaf(self.name, -min(self.max_penalty, self.per_unit * over))


@dataclass(frozen=True)
class SoftOverlong:
    """DAPO's soft overlong punishment (Yu et al. 2025, arXiv 2503.14476, eq. 13):

    0                          if L <= L_max - L_cache
    ((L_max - L_cache) - L) / L_cache   if L_max - L_cache < L <= L_max
    -1                         if L > L_max
    """

    name: str = "overlong"
    max_length: int = 1024  # L_max
    cache: int = 256  # L_cache, the soft zone before L_max
    unit: str = "tokens"

    def __post_init__(self) -> None:
        if not 0 < self.cache <= self.max_length:
            raise ValueError(
                f"overlong: cache ({self.cache}) must be in (0, max_length={self.max_length}]"
            )

    @property
    def needs(self) -> frozenset[str]:
        return frozenset({TOKENS}) if self.unit == "tokens" else frozenset()

    @property
    def bounds(self) -> tuple[float, float]:
        return (-1.0, 0.0)

    def __call__(self, sample: Sample) -> RewardResult:
        n = completion_length(sample, self.unit)
        soft_start = self.max_length - self.cache
        if n <= soft_start:
            score = 0.0
        elif n <= self.max_length:
            score = (soft_start - n) / self.cache
        else:
            score = -1.0
        return leaf(self.name, score)
