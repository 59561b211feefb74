"""Output format checks: code fenced, reasoning tags closed, one function with the right name."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from execrl.rewards.analysis import parse
from execrl.rewards.base import leaf
from execrl.rewards.extract import fences
from execrl.rewards.result import RewardResult
from execrl.rewards.sample import Sample


@dataclass(frozen=True)
class CodeFenced:
    """1.0 when the completion holds a complete ``` fenced block (tagged `language` if set)."""

    name: str = "fenced"
    language: str = ""  # "" accepts any tag, or none

    @property
    def needs(self) -> frozenset[str]:
        return frozenset()

    @property
    def bounds(self) -> tuple[float, float]:
        return (0.0, 1.0)

    def __call__(self, sample: Sample) -> RewardResult:
        tags = [f.tag.lower() for f in fences(sample.completion)]
        ok = bool(tags) and (not self.language or self.language.lower() in tags)
        return leaf(self.name, float(ok))


@dataclass(frozen=True)
class ReasoningClosed:
    """1.0 when every reasoning tag that opens also closes, in order, without nesting, and
    (with `required`) at least one reasoning block is present."""

    name: str = "reasoning_closed"
    tag: str = "think"
    required: bool = False

    @property
    def needs(self) -> frozenset[str]:
        return frozenset()

    @property
    def bounds(self) -> tuple[float, float]:
        return (0.0, 1.0)

    def __call__(self, sample: Sample) -> RewardResult:
        marks = re.findall(rf"<(/?){re.escape(self.tag)}>", sample.completion)
        depth, ok = 0, True
        for closing in marks:
            depth += -1 if closing else 1
            ok = ok and depth in (0, 1)
        ok = ok and depth == 0 and (bool(marks) or not self.required)
        return leaf(self.name, float(ok))


@dataclass(frozen=True)
class OneFunction:
    """1.0 when the program defines exactly one top-level function and it has the task's entry
    point name (or `function`, when set). Tasks without an entry point need only one function."""

    name: str = "one_function"
    function: str = ""

    @property
    def needs(self) -> frozenset[str]:
        return frozenset()

    @property
    def bounds(self) -> tuple[float, float]:
        return (0.0, 1.0)

    def __call__(self, sample: Sample) -> RewardResult:
        tree = parse(sample.program) if sample.program is not None else None
        if tree is None:
            return leaf(self.name, 0.0)
        names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
        want = self.function or sample.task.entry_point
        ok = len(names) == 1 and (want is None or names[0] == want)
        return leaf(self.name, float(ok))
