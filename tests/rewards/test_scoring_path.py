"""The one scoring path (`RewardScorer.score_sample`), as training, eval and the adapters meet
it: a sandbox error masks whatever the tree, no code has one name, a run the sandbox saw trying
to escape its penalty is flagged and penalised, programs are built the same way everywhere."""

from __future__ import annotations

from dataclasses import replace

import pytest

from execrl.rewards import RewardConfig, RewardScorer
from execrl.rewards.result import Flag
from execrl.rewards.scoring.scorer import NO_CODE_MESSAGE, build_sample, no_code_result
from execrl.sandbox import ExecutionResult, Verdict
from execrl.tasks import CallTests, Task

TASK = Task(id="inc", prompt="Write f.", tests=CallTests(((1,),), (2,)), entry_point="f")
CODE_TASK = Task(id="inc2", prompt='def f(x):\n    """Add one."""\n', tests=TASK.tests,
                 entry_point="f")  # fmt: skip


def scorer(tree: dict) -> RewardScorer:
    return RewardScorer(RewardConfig(tree=tree, analysis_workers=0), sandbox=object())


@pytest.mark.parametrize("tree", [{"type": "pass"}, {"type": "style"}, {"type": "syntax"}])
def test_a_sandbox_error_masks_the_sample_whatever_the_tree(tree):
    # a style or syntax leaf reads only the text: before, a sandbox error under it scored
    error = ExecutionResult(Verdict.SANDBOX_ERROR, n_tests=1, message="worker lost",
                            sandbox_error_cause="worker_died")  # fmt: skip
    sample = replace(build_sample(TASK, "def f(x):\n    return x + 1\n"), result=error)
    result = scorer(tree).score_sample(sample)
    assert result.masked and Flag.SANDBOX_ERROR in result.flags
    assert "worker_died" in result.reason


def test_no_code_is_a_syntax_error_flagged_no_code():
    sample = build_sample(TASK, "I do not know.")
    assert sample.program is None
    sample = replace(sample, result=no_code_result(TASK))
    result = scorer({"type": "pass_fraction"}).score_sample(sample)
    assert result.score == 0.0 and not result.masked
    assert result.flags == {Flag.NO_CODE} and result.reason == NO_CODE_MESSAGE


def test_a_possible_hack_is_flagged_and_penalised():
    run = ExecutionResult(Verdict.RUNTIME_ERROR, n_tests=1, message="killed its worker",
                          possible_hack="killed a fresh worker on every attempt")  # fmt: skip
    sample = replace(build_sample(TASK, "def f(x):\n    return x + 1\n"), result=run)
    result = scorer({"type": "verdict_credit"}).score_sample(sample)
    assert Flag.POSSIBLE_HACK in result.flags and result.score == -1.0  # the tree's minimum


def test_auto_continues_a_code_prompt_and_extracts_otherwise():
    body = "    return x + 1\n"
    continued = build_sample(CODE_TASK, body)
    assert continued.program == CODE_TASK.prompt + body and continued.prefix == CODE_TASK.prompt
    whole = "def f(x):\n    return x + 1\n"
    assert build_sample(CODE_TASK, whole).program == whole  # it defines f itself: extracted
    assert build_sample(TASK, f"```python\n{whole}```").program == whole  # prose prompt
