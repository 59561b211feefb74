"""What the execution-free penalty leaves (`static`, `style`, `security`) share: each reads one
`Analysis` of the program, chosen once from its backend (`_backend`: the analysis and the
reading of its raw result), and scores -min(max_penalty, its `penalty` of what was found)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from execrl.rewards.analysis.analysis import Analysis, Failed
from execrl.rewards.base import leaf
from execrl.rewards.result import RewardResult
from execrl.rewards.sample import Sample


class AnalysisPenalty(ABC):
    """Base of a frozen dataclass leaf with fields `name` and `max_penalty`, a `_backend`
    (cached) and `penalty(found) -> float`."""

    name: str
    max_penalty: float
    _backend: tuple[Analysis, Callable[[Any], Any]]

    @abstractmethod
    def penalty(self, found: Any) -> float:
        """The penalty, before the cap, of what `_backend`'s reading found."""

    @property
    def needs(self) -> frozenset[str]:
        return frozenset()

    @property
    def bounds(self) -> tuple[float, float]:
        return (-self.max_penalty, 0.0)

    @property
    def analysis(self) -> Analysis:
        return self._backend[0]

    def __call__(self, sample: Sample) -> RewardResult:
        analysis, read = self._backend
        raw = sample.analysed(analysis)
        if raw is None or isinstance(raw, Failed):  # no program, no parse, or unanalysable
            return unvouched(self.name, self.max_penalty, raw)
        return leaf(self.name, -min(self.max_penalty, self.penalty(read(raw))))


def unvouched(name: str, max_penalty: float, raw: Failed | None) -> RewardResult:
    """The leaf's -max_penalty for no program, one that does not parse, or one the analysis
    cannot handle (`raw`, with the reason)."""
    reason = f"the {name} analysis could not check this program: {raw.error}" if raw else ""
    return RewardResult(-float(max_penalty), {name: -float(max_penalty)}, reason=reason)
