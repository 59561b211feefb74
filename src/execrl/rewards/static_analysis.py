"""Static analysis without execution: undefined names, unused names (pyflakes), unreachable code.

Score = -min(max_penalty, sum of per-issue weights). A program that does not parse, or no
program at all, gets -max_penalty: nothing about it can be vouched for. `backend = "ruff"` reads
ruff's F rules instead of pyflakes (ruff_backend.py); unreachable code is counted on the AST by
both backends.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from execrl.rewards.analysis import Analysis, Failed, parse, unvouched
from execrl.rewards.base import leaf, require
from execrl.rewards.result import RewardResult
from execrl.rewards.sample import Sample
from execrl.rewards.unreachable import unreachable_blocks

# pyflakes message classes by category; anything else it reports is "other".
_CATEGORIES = {
    "UndefinedName": "undefined",
    "UndefinedLocal": "undefined",
    "UndefinedExport": "undefined",
    "UnusedImport": "unused",
    "UnusedVariable": "unused",
    "UnusedAnnotation": "unused",
}
DEFAULT_WEIGHTS = {"undefined": 0.5, "unused": 0.1, "unreachable": 0.2, "other": 0.1}


def issue_counts(program: str) -> Counter[str] | None:
    """Issues by category, or None when the program does not parse."""
    tree = parse(program)
    return None if tree is None else tree_issue_counts(program, tree)


def tree_issue_counts(program: str, tree: ast.Module) -> Counter[str]:
    """Issues by category of an already parsed program (the `Analysis` the leaf names)."""
    require("pyflakes", "static")
    from pyflakes.checker import Checker

    counts: Counter[str] = Counter()
    for message in Checker(tree, filename="<candidate>").messages:
        counts[_CATEGORIES.get(type(message).__name__, "other")] += 1
    counts["unreachable"] = unreachable_blocks(tree)
    return counts


@dataclass(frozen=True)
class StaticAnalysis:
    name: str = "static"
    weights: dict[str, float] = field(default_factory=dict)  # per issue, over DEFAULT_WEIGHTS
    max_penalty: float = 1.0
    backend: str = "pyflakes"  # or "ruff": its F rules, one subprocess per chunk

    def __post_init__(self) -> None:
        unknown = sorted(set(self.weights) - set(DEFAULT_WEIGHTS))
        if unknown:
            raise ValueError(
                f"static weights: unknown categories {unknown}; known: {sorted(DEFAULT_WEIGHTS)}"
            )
        if self.backend not in ("pyflakes", "ruff"):
            raise ValueError(f'static backend: {self.backend!r} must be "pyflakes" or "ruff"')

    @property
    def needs(self) -> frozenset[str]:
        return frozenset()

    @property
    def bounds(self) -> tuple[float, float]:
        return (-self.max_penalty, 0.0)

    @cached_property
    def _backend(self) -> tuple[Analysis, Callable[[Any], Counter[str]]]:
        """The analysis and the reading of its result into categories, chosen once."""
        if self.backend == "pyflakes":
            return PYFLAKES, _as_counts
        from execrl.rewards.ruff_backend import ruff_analysis, static_counts

        return ruff_analysis(), static_counts

    @property
    def analysis(self) -> Analysis:
        return self._backend[0]

    def __call__(self, sample: Sample) -> RewardResult:
        analysis, read = self._backend
        raw = sample.analysed(analysis)
        if raw is None or isinstance(raw, Failed):  # no program, no parse, or unanalysable
            return unvouched(self.name, self.max_penalty, raw)
        w = {**DEFAULT_WEIGHTS, **self.weights}
        penalty = sum(w[cat] * n for cat, n in read(raw).items())
        return leaf(self.name, -min(self.max_penalty, penalty))


def _as_counts(counts: Counter[str]) -> Counter[str]:
    return counts


# Defined after the function it names; weights stay in the leaf, so every `static` leaf of a
# tree shares this one analysis (and its cached result).
PYFLAKES = Analysis("pyflakes", tree_issue_counts)
