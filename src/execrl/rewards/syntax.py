"""Syntax validity: an execution-free signal that is dense where execution rewards are zero."""

from __future__ import annotations

from dataclasses import dataclass

from execrl.rewards.analysis import parse
from execrl.rewards.base import leaf
from execrl.rewards.result import RewardResult
from execrl.rewards.sample import Sample


def parses(program: str | None) -> bool:
    """Whether `analysis.parse` reads it (nesting past the recursion limit does not parse)."""
    return program is not None and parse(program) is not None


@dataclass(frozen=True)
class SyntaxValid:
    """1.0 when the program parses as Python, else 0.0 (also 0.0 when no code was found)."""

    name: str = "syntax"

    @property
    def needs(self) -> frozenset[str]:
        return frozenset()

    @property
    def bounds(self) -> tuple[float, float]:
        return (0.0, 1.0)

    def __call__(self, sample: Sample) -> RewardResult:
        return leaf(self.name, float(parses(sample.program)))
