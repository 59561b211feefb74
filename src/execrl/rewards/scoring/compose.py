"""Combinators: weighted sums, products, gates and hierarchical levels of rewards.

Each combinator's components are its children's components plus its own score under its name.
A masked child masks the whole: an infrastructure failure anywhere means the score is unknown.
Gates and hierarchies evaluate children lazily, so a closed gate costs nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from execrl.rewards.base import Reward
from execrl.rewards.result import RewardResult
from execrl.rewards.sample import Sample


def _merge(name: str, score: float, parts: Sequence[RewardResult]) -> RewardResult:
    components: dict[str, float] = {}
    flags = frozenset().union(*(p.flags for p in parts))
    for p in parts:
        components.update(p.components)
    masked = [p for p in parts if p.masked]
    if masked:
        return RewardResult(
            0.0, components, True, None, flags, "; ".join(p.reason for p in masked if p.reason)
        )
    components[name] = score
    return RewardResult(score, components, flags=flags)


def _needs(children: Sequence[Reward]) -> frozenset[str]:
    return frozenset().union(*(c.needs for c in children))


@dataclass(frozen=True)
class WeightedSum:
    """sum_i w_i * r_i."""

    terms: tuple[tuple[float, Reward], ...]
    name: str = "sum"

    @property
    def needs(self) -> frozenset[str]:
        return _needs([r for _, r in self.terms])

    @property
    def bounds(self) -> tuple[float, float]:
        lo = hi = 0.0
        for w, r in self.terms:
            a, b = w * r.bounds[0], w * r.bounds[1]
            lo, hi = lo + min(a, b), hi + max(a, b)
        return (lo, hi)

    def __call__(self, sample: Sample) -> RewardResult:
        parts = [r(sample) for _, r in self.terms]
        score = sum(w * p.score for (w, _), p in zip(self.terms, parts, strict=True))
        return _merge(self.name, score, parts)


@dataclass(frozen=True)
class Product:
    """prod_i r_i: every factor must be good for the product to be (e.g. pass * style_factor)."""

    factors: tuple[Reward, ...]
    name: str = "product"

    @property
    def needs(self) -> frozenset[str]:
        return _needs(self.factors)

    @property
    def bounds(self) -> tuple[float, float]:
        lo, hi = 1.0, 1.0
        for f in self.factors:
            a, b = f.bounds
            corners = [lo * a, lo * b, hi * a, hi * b]
            lo, hi = min(corners), max(corners)
        return (lo, hi)

    def __call__(self, sample: Sample) -> RewardResult:
        parts = [f(sample) for f in self.factors]
        score = 1.0
        for p in parts:
            score *= p.score
        return _merge(self.name, score, parts)


@dataclass(frozen=True)
class Gate:
    """`reward` counts only if `condition` scored at least `threshold`; else `otherwise`."""

    condition: Reward
    reward: Reward
    threshold: float = 1.0
    otherwise: float = 0.0
    name: str = "gate"

    @property
    def needs(self) -> frozenset[str]:
        return _needs([self.condition, self.reward])

    @property
    def bounds(self) -> tuple[float, float]:
        lo, hi = self.reward.bounds
        return (min(lo, self.otherwise), max(hi, self.otherwise))

    def __call__(self, sample: Sample) -> RewardResult:
        cond = self.condition(sample)
        if cond.masked or cond.score < self.threshold:
            return _merge(self.name, self.otherwise, [cond])
        inner = self.reward(sample)
        return _merge(self.name, inner.score, [cond, inner])


@dataclass(frozen=True)
class Level:
    reward: Reward
    value: float  # the score of a sample that reached this level
    threshold: float = 1.0  # reached when the level's reward scores at least this


@dataclass(frozen=True)
class Hierarchy:
    """Levels in order (e.g. syntax, runs, visible tests, hidden tests): the score is the value
    of the last level reached in a row, or `base` if none.

    With `dense`, the first level not reached adds the fraction of the way to its value that
    its reward, clamped to [0, 1], covers: prev + (value - prev) * clamp(score).
    """

    levels: tuple[Level, ...]
    base: float = 0.0
    dense: bool = False
    name: str = "hierarchy"

    def __post_init__(self) -> None:
        values = [self.base] + [lv.value for lv in self.levels]
        if not self.levels or any(b <= a for a, b in zip(values, values[1:], strict=False)):
            raise ValueError(
                f"hierarchy {self.name!r}: needs levels whose values rise strictly above base "
                f"(got base={self.base}, values={values[1:]})"
            )

    @property
    def needs(self) -> frozenset[str]:
        return _needs([lv.reward for lv in self.levels])

    @property
    def bounds(self) -> tuple[float, float]:
        return (self.base, self.levels[-1].value)

    def __call__(self, sample: Sample) -> RewardResult:
        reached, parts = self.base, []
        for level in self.levels:
            part = level.reward(sample)
            parts.append(part)
            if part.masked:
                break
            if part.score >= level.threshold:
                reached = level.value
                continue
            if self.dense:
                reached += (level.value - reached) * min(1.0, max(0.0, part.score))
            break
        return _merge(self.name, reached, parts)
