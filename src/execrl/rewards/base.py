"""The one reward interface. Leaves and combinators all satisfy it; users may write their own."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Protocol, runtime_checkable

from execrl.rewards.result import Flag, RewardResult
from execrl.rewards.sample import Sample
from execrl.sandbox import Verdict

# What a reward needs before it can score: the scorer runs only what some node needs.
HIDDEN = "hidden"  # the hidden tests' ExecutionResult
VISIBLE = "visible"  # the visible tests' ExecutionResult
TOKENS = "tokens"  # the completion's length in tokens


@runtime_checkable
class Reward(Protocol):
    """A reward: `reward(sample) -> RewardResult`.

    `name` keys its score in `RewardResult.components` (unique within a tree); `needs` says which
    inputs the scorer must supply; `bounds` is the (lowest, highest) score it can give, used for
    the "min" hack penalty and for checks.
    """

    name: str

    @property
    def needs(self) -> frozenset[str]: ...

    @property
    def bounds(self) -> tuple[float, float]: ...

    def __call__(self, sample: Sample) -> RewardResult: ...


class Check(ABC):
    """Base of a frozen dataclass leaf with a field `name` that needs no execution and gives
    1.0 when `holds(sample)`, else 0.0."""

    name: str

    @property
    def needs(self) -> frozenset[str]:
        return frozenset()

    @property
    def bounds(self) -> tuple[float, float]:
        return (0.0, 1.0)

    def __call__(self, sample: Sample) -> RewardResult:
        return leaf(self.name, float(self.holds(sample)))

    @abstractmethod
    def holds(self, sample: Sample) -> bool:
        """Whether the sample has the property this leaf rewards."""


def leaf(name: str, score: float) -> RewardResult:
    return RewardResult(float(score), {name: float(score)})


def masked_if_infra(sample: Sample, tests: str) -> RewardResult | None:
    """The masked result when the run of `tests` failed for reasons that are not the model's."""
    result = sample.execution(tests)
    if result.verdict is Verdict.SANDBOX_ERROR:
        return RewardResult(
            0.0,
            {},
            masked=True,
            flags=frozenset({Flag.SANDBOX_ERROR}),
            reason=f"sandbox error on the {tests} tests: {result.message}",
        )
    return None


def require(module: str, component: str) -> None:
    """Fail with the install command when an optional analyser is missing."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise ImportError(f"the {component!r} reward needs {module}: pip install 'execrl[rewards]'")
