"""Style: a per-violation penalty from pycodestyle (PEP 8), run in-process."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from execrl.rewards.analysis import Analysis, analysed
from execrl.rewards.base import leaf, require
from execrl.rewards.result import RewardResult
from execrl.rewards.sample import Sample


@functools.lru_cache(maxsize=16)
def _options(max_line_length: int, ignore: tuple[str, ...]) -> Any:
    """Parsed once per setting: building a StyleGuide costs more than checking a program."""
    import pycodestyle

    kwargs: dict[str, object] = {"quiet": True, "max_line_length": max_line_length}
    if ignore:
        kwargs["ignore"] = list(ignore)
    return pycodestyle.StyleGuide(**kwargs).options


def style_violations(program: str, max_line_length: int = 100, ignore: tuple[str, ...] = ()) -> int:
    require("pycodestyle", "style")
    import pycodestyle

    options = _options(max_line_length, tuple(ignore))
    checker = pycodestyle.Checker(lines=program.splitlines(True), options=options)
    return int(checker.check_all())


def _tree_style_violations(
    program: str, tree: object, max_line_length: int, ignore: tuple[str, ...]
) -> int:
    """The `Analysis` form: pycodestyle reads lines, not the tree (that it parses is enough)."""
    return style_violations(program, max_line_length, ignore)


@dataclass(frozen=True)
class Style:
    """-min(max_penalty, per_violation * violations); a program that does not parse gets
    -max_penalty. `ignore` replaces pycodestyle's default ignore list (codes like "E501")."""

    name: str = "style"
    per_violation: float = 0.05
    max_penalty: float = 1.0
    max_line_length: int = 100
    ignore: tuple[str, ...] = ()

    @property
    def needs(self) -> frozenset[str]:
        return frozenset()

    @property
    def bounds(self) -> tuple[float, float]:
        return (-self.max_penalty, 0.0)

    @property
    def analysis(self) -> Analysis:
        return Analysis(
            "pycodestyle", _tree_style_violations, (self.max_line_length, tuple(self.ignore))
        )

    def __call__(self, sample: Sample) -> RewardResult:
        n = analysed(sample, self.analysis)
        if n is None:  # no program, or it does not parse
            return leaf(self.name, -self.max_penalty)
        return leaf(self.name, -min(self.max_penalty, self.per_violation * n))
