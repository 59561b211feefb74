"""Syntax validity: an execution-free signal that is dense where execution rewards are zero."""

from __future__ import annotations

from dataclasses import dataclass

from execrl.rewards.analysis.analysis import parse
from execrl.rewards.base import Check
from execrl.rewards.sample import Sample


def parses(program: str | None) -> bool:
    """Whether `analysis.parse` reads it (nesting past the recursion limit does not parse)."""
    return program is not None and parse(program) is not None


@dataclass(frozen=True)
class SyntaxValid(Check):
    """1.0 when the program parses as Python, else 0.0 (also 0.0 when no code was found)."""

    name: str = "syntax"

    def holds(self, sample: Sample) -> bool:
        return parses(sample.program)
