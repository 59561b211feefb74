"""Token-level credit reaches the loss: the tokenizer's offsets go to the scorer, the failing
line's tokens carry the penalty into the per-token rewards of REINFORCE++ and PPO (GAE)."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
import torch

from batch_helpers import builder
from execrl.cli import main
from execrl.models.engines.sampling import Completion
from execrl.rewards import RewardConfig, RewardScorer
from execrl.rewards.scoring.scorer import build_sample
from execrl.rewards.scoring.token_credit import TokenCredit
from execrl.rl.episodes.trajectory import token_offsets
from execrl.rl.rollout.scored import Scored
from execrl.sandbox import ExecutionResult, Verdict
from execrl.sandbox import TestOutcome as Outcome
from execrl.tasks import CallTests, Task

# The worked example of docs/rewards.md: line 2 of the program ("    y = 1 / 0") raises.
COMPLETION = "```python\ndef f(x):\n    y = 1 / 0\n    return x\n```"
ENDS = [m.end() for m in re.finditer(r"\S+", COMPLETION)]
# One token per word, each with the whitespace before it: token i writes PIECES[i].
PIECES = [COMPLETION[a:b] for a, b in zip([0, *ENDS], ENDS, strict=False)]
TASK = Task(id="inc", prompt="Write f.", tests=CallTests(((1,),), (2,)), entry_point="f")


class WordTokenizer:
    def decode(self, ids: list[int]) -> str:
        return "".join(PIECES[i] for i in ids)


def scored(credit_sample: bool = True, n_tokens: int = len(PIECES)) -> Scored:
    ids = list(range(len(PIECES)))
    offsets = token_offsets(WordTokenizer(), ids, COMPLETION)
    crash = ExecutionResult(
        Verdict.RUNTIME_ERROR, (Outcome(0, Verdict.RUNTIME_ERROR, "ZeroDivisionError", "", 2),), 1
    )
    config = RewardConfig(tree={"type": "verdict_credit"},
                          token_credit=TokenCredit(enabled=credit_sample, line_penalty=0.5))  # fmt: skip
    sample = build_sample(TASK, COMPLETION)
    sample = replace(sample, result=crash, offsets=offsets, n_tokens=len(ids))
    reward = RewardScorer(config, sandbox=object()).score_sample(sample)
    completion = Completion(0, COMPLETION, torch.tensor([1]), torch.arange(n_tokens),
                            torch.zeros(n_tokens), "eos")  # fmt: skip
    return Scored.answer(0, completion, reward, sample)


def advantage_inputs(algorithm: str, samples: list[Scored]):
    """What `algorithm`'s estimator reads of `samples` (a group of two; no reference, no critic)."""
    return builder(f"rl.algorithm='{algorithm}'", "rl.group_size=2").advantage_inputs(
        samples, [], []
    )


def test_offsets_from_the_token_ids_cover_the_text_one_span_per_token():
    spans = token_offsets(WordTokenizer(), list(range(len(PIECES))), COMPLETION)
    assert len(spans) == len(PIECES) and spans[0] == (0, 9) and spans[-1] == (46, 50)
    assert all(a <= b for a, b in spans) and spans[-1][1] == len(COMPLETION)


@pytest.mark.parametrize("algorithm", ["reinforce_pp", "ppo"])
def test_the_failing_lines_tokens_get_the_penalty_and_the_rest_do_not(algorithm):
    s = scored()
    # verdict_credit scores a runtime error -0.6; tokens 3..7 ("y = 1 / 0", with the spaces
    # before each) overlap line 2 and share line_penalty 0.5: -0.1 each; the last token -0.6
    expected = [0, 0, 0, -0.1, -0.1, -0.1, -0.1, -0.1, 0, 0, -0.6]
    assert s.reward.token_credit == pytest.approx(expected)
    inputs = advantage_inputs(algorithm, [s, s])
    assert inputs.token_rewards[0].tolist() == pytest.approx(expected)
    # REINFORCE++'s return to go (gamma 1) sees the penalty only up to the failing line
    from execrl.rl.objective.advantages import return_to_go

    returns = return_to_go(inputs.token_rewards, inputs.mask)[0].tolist()
    assert returns == pytest.approx(
        [-1.1, -1.1, -1.1, -1.1, -1.0, -0.9, -0.8, -0.7, -0.6, -0.6, -0.6]
    )


def test_without_credit_the_score_is_on_the_last_token_only():
    s = scored(credit_sample=False)
    assert s.reward.token_credit is None
    rewards = advantage_inputs("reinforce_pp", [s, s]).token_rewards[0]
    assert rewards.tolist() == pytest.approx([0.0] * 10 + [-0.6])


def test_credit_of_another_length_than_the_completion_is_an_error():
    s = scored(n_tokens=len(PIECES) + 1)  # the offsets came from other tokens than trained on
    with pytest.raises(ValueError, match="token credit has 11 values for a completion of 12"):
        advantage_inputs("ppo", [s, s])


def test_token_credit_trains_with_ppo_through_the_cli(tiny_model_dir, tmp_path):
    small = ["rl.algorithm='ppo'", "reward.token_credit.enabled=true", "rl.group_size=2",
             "rl.groups_per_step=2", "rl.dynamic_sampling=false", "run.steps=1",
             "data.heldout=''", "data.n_train=4", "sampling.max_new_tokens=8",
             f"model.path={str(tiny_model_dir)!r}", f"run.out_dir={str(tmp_path)!r}",
             "run.name='ppo'"]  # fmt: skip
    assert main(["train", *sum((["--set", s] for s in small), [])]) == 0
    row = json.loads((tmp_path / "ppo" / "metrics.jsonl").read_text().splitlines()[0])
    assert row["skipped_update"] == 0.0 and row["value_loss"] > 0.0  # PPO reports its critic
