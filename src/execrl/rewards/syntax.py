"""Syntax validity: an execution-free signal that is dense where execution rewards are zero."""

from __future__ import annotations

import ast
import warnings
from dataclasses import dataclass

from execrl.rewards.base import leaf
from execrl.rewards.result import RewardResult
from execrl.rewards.sample import Sample


def parses(program: str | None) -> bool:
    if program is None:
        return False
    try:
        with warnings.catch_warnings():  # invalid escape sequences warn; they are not errors
            warnings.simplefilter("ignore")
            ast.parse(program)
    except (SyntaxError, ValueError):  # ValueError: NUL bytes in the source
        return False
    return True


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
