"""Analyses for the analysis-pool tests. They live in a module of their own, importable by the
worker processes as `rewards.analysis_helpers` (pytest puts tests/ on sys.path), because an
`Analysis`'s function is pickled by name."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from execrl.rewards.analysis.analysis import Analysis, Failed
from execrl.rewards.base import leaf
from execrl.rewards.leaves.analysis_leaf import unvouched
from execrl.rewards.result import RewardResult
from execrl.rewards.sample import Sample

CALLS: list[str] = []  # programs `counting` was called on, in this process


def crash_on_marker(program: str, tree: object) -> int:
    """Kills the process it runs in, as a segfaulting C extension would, on marked programs."""
    if "CRASH" in program:
        os._exit(3)
    return 0


def crash_always(program: str, tree: object) -> int:
    """Kills the process it runs in on every program: the pool's failure, not a program's."""
    os._exit(3)


def hang_on_marker(program: str, tree: object) -> int:
    """Never returns on marked programs, as a backtracking regex would not for hours."""
    while "HANG" in program:
        time.sleep(1)
    return 0


def raise_on_marker(program: str, tree: object) -> int:
    if "BOOM" in program:
        raise ValueError("boom on purpose")
    return len(program)


def counting(program: str, tree: object) -> int:
    CALLS.append(program)
    return len(program)


@dataclass(frozen=True)
class ProbeLeaf:
    """Scores -(its analysis's raw number); 0 when the program does not parse."""

    analysis: Analysis
    name: str = "probe"

    @property
    def needs(self) -> frozenset[str]:
        return frozenset()

    @property
    def bounds(self) -> tuple[float, float]:
        return (-1e9, 0.0)

    def __call__(self, sample: Sample) -> RewardResult:
        raw = sample.analysed(self.analysis)
        if isinstance(raw, Failed):  # the program's fault: the worker died or hung on it alone
            return unvouched(self.name, 1.0, raw)
        return leaf(self.name, 0.0 if raw is None else -float(raw))
