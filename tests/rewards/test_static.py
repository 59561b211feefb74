"""Execution-free components: syntax, pyflakes analysis, pycodestyle style, bandit security."""

from __future__ import annotations

import pytest

from execrl.rewards import Security, StaticAnalysis, Style, SyntaxValid
from execrl.rewards.leaves.static_analysis import unreachable_blocks

from .conftest import sample


def test_syntax():
    assert SyntaxValid()(sample("def f(x):\n    return x\n")).score == 1.0
    assert SyntaxValid()(sample("def f(x:\n")).score == 0.0
    assert SyntaxValid()(sample(None)).score == 0.0


def test_static_analysis_counts_by_category():
    program = (
        "import os\n"  # unused import: 0.1
        "def f(x):\n"
        "    y = 2\n"  # unused variable: 0.1
        "    return z\n"  # undefined name: 0.5
        "    print(x)\n"  # unreachable after return: 0.2
    )
    # total 0.1 + 0.1 + 0.5 + 0.2 = 0.9 -> -0.9
    assert StaticAnalysis()(sample(program)).score == pytest.approx(-0.9)
    # weights override the defaults; the penalty is capped at max_penalty
    heavy = StaticAnalysis(weights={"undefined": 2.0}, max_penalty=1.5)
    assert heavy(sample(program)).score == pytest.approx(-1.5)
    assert StaticAnalysis()(sample("def f(x):\n    return x\n")).score == 0.0
    assert StaticAnalysis()(sample("def f(:\n")).score == -1.0  # does not parse: -max_penalty


def test_unreachable_blocks():
    import ast

    tree = ast.parse(
        "def f():\n    for i in range(3):\n        break\n        i += 1\n    return 1\n"
    )
    assert unreachable_blocks(tree) == 1


def test_style_per_violation():
    # E225 (missing whitespace around =) once, E111 (indent not a multiple of 4) twice
    program = "def f(x):\n  y=1\n  return x + y\n"
    assert Style()(sample(program)).score == pytest.approx(-3 * 0.05)
    assert Style(per_violation=0.5, max_penalty=1.0)(sample(program)).score == -1.0
    assert Style()(sample("def f(x):\n    return x\n")).score == 0.0
    assert Style(ignore=("E111", "E225"))(sample(program)).score == 0.0


def test_security_by_severity():
    program = (
        "import subprocess\n"  # B404, LOW: 0.1
        "def f(x):\n"
        "    subprocess.call(x, shell=True)\n"  # B602, HIGH: 0.6
        "    return eval(x)\n"  # B307, MEDIUM: 0.3
    )
    # 0.1 + 0.6 + 0.3 = 1.0 -> -1.0 (max_penalty 2.0 so no cap)
    assert Security(max_penalty=2.0)(sample(program)).score == pytest.approx(-1.0)
    assert Security(severity={"HIGH": 0.0})(sample(program)).score == pytest.approx(-0.4)
    assert Security()(sample("def f(x):\n    return x + 1\n")).score == 0.0
