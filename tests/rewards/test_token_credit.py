"""Token credit: the worked example of docs/rewards.md, by hand and through the sandbox."""

from __future__ import annotations

import re

import pytest

from execrl.rewards import RewardConfig, RewardScorer
from execrl.rewards.sample import Sample
from execrl.rewards.scoring.scorer import build_sample
from execrl.rewards.scoring.token_credit import (
    TokenCredit,
    completion_span,
    dense_credit,
    failing_line,
    line_span,
    token_credit,
)
from execrl.sandbox import ExecutionResult, Verdict
from execrl.sandbox import TestOutcome as Outcome

from .conftest import TASK

COMPLETION = "```python\ndef f(x):\n    y = 1 / 0\n    return x\n```"
# Whitespace tokens: the offsets a tokenizer would give, one (start, end) per token:
#   0 "```python"(0,9) 1 "def"(10,13) 2 "f(x):"(14,19) 3 "y"(24,25) 4 "="(26,27) 5 "1"(28,29)
#   6 "/"(30,31) 7 "0"(32,33) 8 "return"(38,44) 9 "x"(45,46) 10 "```"(47,50)
OFFSETS = tuple((m.start(), m.end()) for m in re.finditer(r"\S+", COMPLETION))


def test_worked_example_by_hand():
    sample = build_sample(TASK, COMPLETION)
    assert sample.code_span == (10, 47) and sample.program == COMPLETION[10:47]
    # program line 2 is "    y = 1 / 0": program chars [10, 23), completion chars [20, 33)
    assert line_span(sample.program, 2) == (10, 23)
    assert completion_span(sample, 2) == (20, 33)
    # tokens 3..7 overlap it: each gets -0.5 / 5 = -0.1; the last token gets the score -0.6
    credit = dense_credit(-0.6, OFFSETS, (20, 33), line_penalty=0.5)
    assert credit == pytest.approx([0, 0, 0, -0.1, -0.1, -0.1, -0.1, -0.1, 0, 0, -0.6])
    assert sum(credit) == pytest.approx(-0.6 - 0.5)


def test_failing_line_from_results():
    crash = ExecutionResult(
        Verdict.RUNTIME_ERROR,
        (Outcome(0, Verdict.PASSED), Outcome(1, Verdict.RUNTIME_ERROR, "E", "", 4)),
        n_tests=2,
    )
    assert failing_line(crash) == 4
    syntax = ExecutionResult(Verdict.SYNTAX_ERROR, n_tests=2, message="line 3: invalid syntax")
    assert failing_line(syntax) == 3
    wrong = ExecutionResult(Verdict.WRONG_ANSWER, (Outcome(0, Verdict.WRONG_ANSWER),), 1)
    assert failing_line(wrong) is None  # an assert of the test code: no candidate line


def test_line_in_the_prompt_prefix_stays_sparse():
    # "continue" mode: the program is prompt + completion; line 1 is the prompt's
    s = Sample(TASK, "    return x\n", "def f(x):\n    return x\n", "def f(x):\n", (0, 13))
    assert completion_span(s, 1) is None
    assert completion_span(s, 2) == (0, 12)
    res = ExecutionResult(
        Verdict.RUNTIME_ERROR, (Outcome(0, Verdict.RUNTIME_ERROR, "E", "", 1),), 1
    )
    from dataclasses import replace

    credit = token_credit(replace(s, result=res, offsets=((4, 10), (11, 12))), -1.0, TokenCredit())
    assert credit == (0.0, -1.0)


def test_worked_example_through_the_sandbox(sandbox):
    config = RewardConfig.from_dict(
        {"tree": {"type": "verdict_credit"}, "token_credit": {"enabled": True}}
    )
    scorer = RewardScorer(config, sandbox=sandbox)
    (r,) = scorer.score([TASK], [COMPLETION], offsets=[OFFSETS])
    # the sandbox reports ZeroDivisionError on candidate line 2; CodeRL runtime error = -0.6
    assert r.score == -0.6
    assert r.token_credit == pytest.approx([0, 0, 0, -0.1, -0.1, -0.1, -0.1, -0.1, 0, 0, -0.6])
