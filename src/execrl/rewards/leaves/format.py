"""Output format checks: code fenced, reasoning tags closed, one function with the right name."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from execrl.rewards.analysis.analysis import parse
from execrl.rewards.base import Check
from execrl.rewards.leaves.extract import fences
from execrl.rewards.sample import Sample


@dataclass(frozen=True)
class CodeFenced(Check):
    """1.0 when the completion holds a complete ``` fenced block (tagged `language` if set)."""

    name: str = "fenced"
    language: str = ""  # "" accepts any tag, or none

    def holds(self, sample: Sample) -> bool:
        tags = [f.tag.lower() for f in fences(sample.completion)]
        return bool(tags) and (not self.language or self.language.lower() in tags)


@dataclass(frozen=True)
class ReasoningClosed(Check):
    """1.0 when every reasoning tag that opens also closes, in order, without nesting, and
    (with `required`) at least one reasoning block is present."""

    name: str = "reasoning_closed"
    tag: str = "think"
    required: bool = False

    def holds(self, sample: Sample) -> bool:
        marks = re.findall(rf"<(/?){re.escape(self.tag)}>", sample.completion)
        depth, ok = 0, True
        for closing in marks:
            depth += -1 if closing else 1
            ok = ok and depth in (0, 1)
        return ok and depth == 0 and (bool(marks) or not self.required)


@dataclass(frozen=True)
class OneFunction(Check):
    """1.0 when the program defines exactly one top-level function and it has the task's entry
    point name (or `function`, when set). Tasks without an entry point need only one function."""

    name: str = "one_function"
    function: str = ""

    def holds(self, sample: Sample) -> bool:
        tree = parse(sample.program) if sample.program is not None else None
        if tree is None:
            return False
        names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
        want = self.function or sample.task.entry_point
        return len(names) == 1 and (want is None or names[0] == want)
