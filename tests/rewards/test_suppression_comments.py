"""Suppression comments in a candidate's code never change a reward: every backend of the
static, style and security leaves ignores them (`# noqa`, `# nosec`, `# type: ignore`, ...).

Each comment is compared with a neutral comment of the same length ("# noqa" against "# xxxx"),
so that the comment's own style (its length, its spacing) counts the same in both programs."""

from __future__ import annotations

import re

import pytest

from execrl.rewards import Security, StaticAnalysis, Style

from .conftest import sample

# Findings for every backend: pyflakes/F (unused import and variable, undefined name),
# pycodestyle/E-W (E302, E711, E501 — E711 and E501 honour noqa comments in pycodestyle), and
# bandit/S (B404 import subprocess, B602 shell=True, B307 eval).
PROGRAM = (
    "import os\n"
    "import subprocess\n"
    "def f(x):\n"
    "    y = 2\n"
    "    subprocess.call(x, shell=True)\n"
    "    if x == None:\n"
    "        return eval(x)\n"
    "    s = 'a very long line that goes on and on past the limit of a hundred characters, yes'\n"
    "    return z + s\n"
)
INLINE = [
    "# noqa",
    "# NOQA",
    "# noqa: E501,E711,F401,F841,F821,S602,S404,S307",
    "# nosec",
    "# nosec B602,B404,B307",
    "# nopep8",
    "# type: ignore",
    "# pyright: ignore",
    "# pragma: no cover",
    "# fmt: skip",
    "# pylint: disable=all",
    "# ruff: noqa",
    "# flake8: noqa",
    "# isort: skip",
]
FILE_LEVEL = [
    "# ruff: noqa",
    "# flake8: noqa",
    "# fmt: off",
    "# pylint: disable=all",
    "# nosec",
    "# noqa",
    "# type: ignore",
    "# mypy: ignore-errors",
    "# pyright: basic",
    "# ruff: disable[E501, E711, F401, F841, F821, S602, S404, S307]",
]
LEAVES = [
    StaticAnalysis(max_penalty=10),
    StaticAnalysis(backend="ruff", max_penalty=10),
    Style(max_penalty=10),
    Style(backend="ruff", max_penalty=10),
    Security(max_penalty=10),
    Security(backend="ruff", max_penalty=10),
]


def _neutral(comment: str) -> str:
    return "# " + re.sub(r"\w", "x", comment[2:])


def _inline(comment: str) -> str:
    return "".join(f"{line}  {comment}\n" for line in PROGRAM.splitlines())


def _file_level(comment: str) -> str:
    return f"{comment}\n{PROGRAM}"


@pytest.mark.parametrize("where", ["inline", "file"])
def test_suppression_comments_never_change_a_reward(where):
    comments, place = (INLINE, _inline) if where == "inline" else (FILE_LEVEL, _file_level)
    changed = []
    for comment in comments:
        for leaf in LEAVES:
            plain = leaf(sample(place(_neutral(comment)))).score
            suppressed = leaf(sample(place(comment))).score
            assert plain < 0  # there are findings to suppress
            if suppressed != plain:
                changed.append((leaf.name, leaf.backend, comment, plain, suppressed))
    assert not changed
