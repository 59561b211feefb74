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

from execrl.rewards.analysis.analysis import Analysis, parse
from execrl.rewards.analysis.unreachable import unreachable_blocks
from execrl.rewards.base import require
from execrl.rewards.leaves.analysis_leaf import AnalysisPenalty

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
class StaticAnalysis(AnalysisPenalty):
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

    @cached_property
    def _backend(self) -> tuple[Analysis, Callable[[Any], Counter[str]]]:
        """The analysis and the reading of its result into categories, chosen once."""
        if self.backend == "pyflakes":
            return PYFLAKES, _as_counts
        from execrl.rewards.analysis.ruff_backend import ruff_analysis, static_counts

        return ruff_analysis(), static_counts

    def penalty(self, found: Counter[str]) -> float:
        w = {**DEFAULT_WEIGHTS, **self.weights}
        return sum(w[cat] * n for cat, n in found.items())


def _as_counts(counts: Counter[str]) -> Counter[str]:
    return counts


# Defined after the function it names; weights stay in the leaf, so every `static` leaf of a
# tree shares this one analysis (and its cached result).
PYFLAKES = Analysis("pyflakes", tree_issue_counts)
