"""Style: a per-violation penalty from pycodestyle (PEP 8), or from ruff's E and W rules."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from execrl.rewards.analysis.analysis import Analysis, Unanalysable
from execrl.rewards.base import require
from execrl.rewards.leaves.analysis_leaf import AnalysisPenalty

# pycodestyle's DEFAULT_IGNORE, which an empty `ignore` keeps (pycodestyle 2.x); ruff has only
# E226, E241 and E242 of these, and the ruff backend ignores them the same way.
PYCODESTYLE_DEFAULT_IGNORE = ("E121", "E123", "E126", "E226", "E24", "E704", "W503", "W504")
# pycodestyle's regexes backtrack on long lines: E711's took time quadratic in a run of blanks
# (2.2 s at 8,000 spaces, 254 s at 100,000; twenty 1,990-space runs in one bracketed statement,
# 9.9 s). A program with a line over MAX_LINE_CHARS, or whose runs of 64 or more blanks add up
# to over MAX_BLANK_WORK (the sum of their squared lengths; ~0.5 s), is not checked: its style
# leaf gives -max_penalty. Honest code stays far below both (ruff, native, has no such bound).
MAX_LINE_CHARS = 2_000
MAX_BLANK_WORK = 4_000_000
_BLANK_RUN = re.compile(r"[ \t\f]{64,}")


@functools.lru_cache(maxsize=16)
def _options(max_line_length: int, ignore: tuple[str, ...]) -> Any:
    """Parsed once per setting: building a StyleGuide costs more than checking a program."""
    import pycodestyle

    kwargs: dict[str, object] = {"quiet": True, "max_line_length": max_line_length}
    if ignore:
        kwargs["ignore"] = list(ignore)
    return pycodestyle.StyleGuide(**kwargs).options


def style_violations(program: str, max_line_length: int = 100, ignore: tuple[str, ...] = ()) -> int:
    """pycodestyle's violations, with `# noqa` comments ignored (a program cannot silence its
    own findings); `Unanalysable` for a line over MAX_LINE_CHARS."""
    require("pycodestyle", "style")
    lines = program.splitlines(True)
    longest = max(map(len, lines), default=0)
    if longest > MAX_LINE_CHARS:
        raise Unanalysable(
            f"a line of {longest} characters (pycodestyle checks up to {MAX_LINE_CHARS})"
        )
    work = sum(len(run.group()) ** 2 for run in _BLANK_RUN.finditer(program))
    if work > MAX_BLANK_WORK:
        raise Unanalysable(
            f"runs of blanks whose squared lengths add up to {work} (pycodestyle's regexes take "
            f"time quadratic in them; it checks up to {MAX_BLANK_WORK})"
        )
    options = _options(max_line_length, tuple(ignore))
    return int(_checker_class()(lines=lines, options=options).check_all())


@functools.cache
def _checker_class() -> type:
    """pycodestyle's Checker without `# noqa`: it reads the comment into `self.noqa` and hands
    that to the checks that honour it (E501, E711, E721, E722, W605, ...); here it stays False."""
    import pycodestyle

    class Checker(pycodestyle.Checker):  # type: ignore[misc]
        noqa = property(lambda self: False, lambda self, value: None)

    return Checker


def _tree_style_violations(
    program: str, tree: object, max_line_length: int, ignore: tuple[str, ...]
) -> int:
    """The `Analysis` form: pycodestyle reads lines, not the tree (that it parses is enough)."""
    return style_violations(program, max_line_length, ignore)


@dataclass(frozen=True)
class Style(AnalysisPenalty):
    """-min(max_penalty, per_violation * violations); a program that does not parse gets
    -max_penalty. `ignore` replaces pycodestyle's default ignore list (codes or prefixes like
    "E501", "E2"); the ruff backend applies the same list to ruff's codes."""

    name: str = "style"
    per_violation: float = 0.05
    max_penalty: float = 1.0
    max_line_length: int = 100
    ignore: tuple[str, ...] = ()
    backend: str = "pycodestyle"  # or "ruff": its E and W rules, one subprocess per chunk

    def __post_init__(self) -> None:
        if self.backend not in ("pycodestyle", "ruff"):
            raise ValueError(f'style backend: {self.backend!r} must be "pycodestyle" or "ruff"')
        if self.backend == "ruff" and not 1 <= self.max_line_length <= 320:
            raise ValueError(
                f"style max_line_length: {self.max_line_length}; ruff accepts 1 to 320"
            )

    @functools.cached_property
    def _backend(self) -> tuple[Analysis, Callable[[Any], int]]:
        """The analysis and the reading of its result into a violation count, chosen once."""
        if self.backend == "pycodestyle":
            args = (self.max_line_length, tuple(self.ignore))
            return Analysis("pycodestyle", _tree_style_violations, args), int
        from execrl.rewards.analysis.ruff_backend import ruff_analysis, style_count

        ignore = tuple(self.ignore) or PYCODESTYLE_DEFAULT_IGNORE
        return (
            ruff_analysis(self.max_line_length),
            functools.partial(style_count, ignore=ignore),
        )

    def penalty(self, found: int) -> float:
        return self.per_violation * found
