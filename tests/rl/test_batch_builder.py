"""The batch builder by hand, without a model: scored samples of known rewards and tokens in,
the update's (B, T) tensors out. The model's part (log-probs, a critic's values) is injected as
fixed numbers (`batch_helpers.builder`, `ModelTerms`)."""

from __future__ import annotations

import math
from dataclasses import replace

import torch

from batch_helpers import builder
from execrl.models.engines.sampling import Completion
from execrl.rewards.result import RewardResult
from execrl.rewards.scoring.scorer import build_sample
from execrl.rl.config.config import load_config
from execrl.rl.rollout.groups import GroupSummary
from execrl.rl.rollout.scored import Scored, Turns
from execrl.rl.update.batch_builder import BatchBuilder
from execrl.rl.update.batch_rows import ModelTerms
from execrl.rl.update.learner_settings import LearnerSettings
from execrl.sandbox import ExecutionResult, Verdict
from execrl.tasks import CallTests, Task

TASK = Task(id="inc", prompt="Write f.", tests=CallTests(((1,),), (2,)), entry_point="f")
PROMPT = torch.tensor([1, 2])
A = 0.5 / (math.sqrt(0.5) + 1e-4)  # GRPO over returns 1 and 0: +-0.5 over the std sqrt(0.5)
SELF_CORRECT = ("env.name='self_correct'", "env.max_turns=2", "rl.group_size=2")


def close(values: torch.Tensor, expected: list[list[float]]) -> bool:
    return torch.allclose(values, torch.tensor(expected), atol=1e-6)


def one_turn(score: float, tokens: list[int], logprob: float = -1.0) -> Scored:
    n = len(tokens)
    completion = Completion(0, "x", PROMPT, torch.tensor(tokens), torch.full((n,), logprob), "eos")
    return Scored.answer(0, completion, RewardResult(score), build_sample(TASK, "x"))


def episode(first: list[int], second: list[int], passed: tuple[bool, bool]) -> Scored:
    """A self-correction episode: the first attempt, three feedback tokens (20, 21, 22), the
    second attempt; turn rewards 0 and 1 when the second passed (turn_reward "final")."""
    tokens = [*first, 20, 21, 22, *second]
    mask = torch.tensor([1.0] * len(first) + [0.0] * 3 + [1.0] * len(second))
    logprobs = -0.25 * mask
    completion = Completion(0, "x", PROMPT, torch.tensor(tokens), logprobs, "eos")
    rewards = (0.0, float(passed[1]))
    verdict = Verdict.PASSED if passed[1] else Verdict.WRONG_ANSWER
    sample = replace(build_sample(TASK, "x"), result=ExecutionResult(verdict))
    turns = Turns(mask, (len(first) - 1, len(tokens) - 1), rewards, 1.0, passed)
    return Scored(0, completion, RewardResult(sum(rewards)), sample, turns)


def right_at_once(tokens: list[int]) -> Scored:
    """An episode whose first attempt passed: one turn, reward 1."""
    n = len(tokens)
    completion = Completion(0, "x", PROMPT, torch.tensor(tokens), torch.full((n,), -0.25), "eos")
    sample = replace(build_sample(TASK, "x"), result=ExecutionResult(Verdict.PASSED))
    turns = Turns(torch.ones(n), (n - 1,), (1.0,), 1.0, (True,))
    return Scored(0, completion, RewardResult(1.0), sample, turns)


def test_a_group_of_two_gives_grpo_advantages_and_masks_by_hand():
    group = [one_turn(1.0, [10, 11, 12]), one_turn(0.0, [10, 13])]
    grpo = builder("rl.algorithm='grpo'", "rl.group_size=2")
    built = grpo.build([group])
    [batch] = built.own
    assert built.batches == [batch] and built.segment_rows == built.correction_rows == 0
    assert batch.mask.tolist() == [[1, 1, 1], [1, 1, 0]]  # the second row's padding is 0
    assert close(batch.advantages, [[A, A, A], [-A, -A, 0]])
    assert batch.old_logp.tolist() == [[-1, -1, -1], [-1, -1, 0]]  # the engine's: pi_old
    assert batch.engine_logp is None and batch.ref_logp is None and batch.old_values is None
    assert batch.kl_coef_tokens is None and batch.tasks.tolist() == [0, 0]
    assert grpo.denominator([GroupSummary.of(group)]) == 5  # DAPO's token mean: 5 tokens
    # a masked reward: out of the loss and the baseline (a group of one valid: advantage 0)
    masked = [group[0], replace(group[1], reward=RewardResult(0.0, masked=True))]
    every_row = builder("rl.algorithm='grpo'", "rl.group_size=2", keep_idle_rows=True)
    [batch] = every_row.build([masked]).batches
    assert batch.mask.tolist() == [[1, 1, 1], [0, 0, 0]] and (batch.advantages == 0).all()
    assert grpo.build([masked]).batches == []  # idle rows: no forward (`skips_idle_rows`)


def test_micro_batches_split_the_rows_and_keep_their_advantages():
    group = [one_turn(1.0, [10, 11, 12]), one_turn(0.0, [10, 13])]
    first, second = builder("rl.group_size=2", "rl.micro_batch_size=1").build([group]).own
    assert close(first.advantages, [[A, A, A]])
    assert close(second.advantages, [[-A, -A]])  # padded to its own width


def test_a_critic_and_a_stale_behaviour_policy_come_from_the_injected_model_terms():
    """PPO with a critic whose values are all 0.5, gamma 1, lambda 0.95, and rl.max_staleness
    = 1 (the trainer's log-probs are pi_old, the engine's mu): GAE by hand, from the last token
    back: delta = r + V' - V, A = delta + 0.95 A'. Three tokens, reward 1 on the last: deltas
    0, 0, 0.5, advantages 0.45125, 0.475, 0.5; two tokens, reward 0: deltas 0, -0.5."""
    settings = LearnerSettings.of(load_config(None, [
        "rl.algorithm='ppo'", "rl.group_size=2", "rl.max_staleness=1",
    ]))  # fmt: skip
    terms = ModelTerms(policy_logp=lambda batch: torch.full(batch.token_mask.shape, -0.5),
                       values=lambda batch: torch.full(batch.token_mask.shape, 0.5))  # fmt: skip
    ppo = BatchBuilder(settings, terms, pad_id=0, device=torch.device("cpu"))
    [batch] = ppo.build([[one_turn(1.0, [10, 11, 12]), one_turn(0.0, [10, 13])]]).batches
    assert close(batch.advantages, [[0.45125, 0.475, 0.5], [-0.475, -0.5, 0]])
    assert close(batch.value_targets, [[0.95125, 0.975, 1.0], [0.025, 0, 0]])
    assert batch.old_values.tolist() == [[0.5, 0.5, 0.5], [0.5, 0.5, 0]]
    assert batch.old_logp.tolist() == [[-0.5, -0.5, -0.5], [-0.5, -0.5, 0]]  # the trainer's
    assert batch.engine_logp.tolist() == [[-1, -1, -1], [-1, -1, 0]]  # the behaviour's (mu)


def test_credit_from_turn_2_zeroes_the_first_attempts_advantages_and_holds_it_with_kl():
    fixed = episode([10, 11], [12, 13], (False, True))
    failed = episode([10, 11], [14, 15], (False, False))
    plain = builder(*SELF_CORRECT).build([[fixed, failed]]).batches[0]
    policy = [1, 1, 0, 0, 0, 1, 1]  # the feedback's tokens are the environment's
    assert plain.mask.tolist() == [policy, policy]
    assert close(plain.advantages, [[A * m for m in policy],
                                                       [-A * m for m in policy]])  # fmt: skip
    held = builder(*SELF_CORRECT, "credit.from_turn=2", "credit.held_kl_coef=0.5")
    [batch] = held.build([[fixed, failed]]).batches
    second = [0, 0, 0, 0, 0, 1, 1]
    assert close(batch.advantages, [[A * m for m in second],
                                                       [-A * m for m in second]])  # fmt: skip
    assert batch.mask.tolist() == [policy, policy]  # the first attempt still in the loss (KL)
    assert batch.kl_coef_tokens.tolist() == [[0.5, 0.5, 0, 0, 0, 0, 0]] * 2


def test_a_correction_sample_adds_one_row_with_the_fixed_advantage_on_its_answer():
    """Fixed at turn 2 beside one right at once: the fixed episode's failed attempt and its
    feedback, then the other's passing answer (12, 13), is the one correction sample; its old
    log-probs are the trainer's own (here -0.5), on the answer alone; with one epoch they are
    left to the update's own forward (None), which gives the same numbers without a forward."""
    group = [episode([10, 11], [12, 13], (False, True)), right_at_once([12, 13])]
    once = builder(*SELF_CORRECT, "credit.correction_coef=0.5", logp=-0.5).build([group])
    assert [c.old_logp for c in once.corrections] == [None]
    built = builder(*SELF_CORRECT, "credit.correction_coef=0.5", "rl.epochs=2",
                    logp=-0.5).build([group])  # fmt: skip
    assert built.correction_rows == 1 and len(built.batches) == len(built.own) + 1
    [correction] = built.corrections
    assert correction.sequences.completion_ids.tolist() == [[10, 11, 20, 21, 22, 12, 13]]
    assert correction.mask.tolist() == [[0, 0, 0, 0, 0, 1, 1]]
    assert correction.advantages.tolist() == [[0, 0, 0, 0, 0, 0.5, 0.5]]
    assert correction.old_logp.tolist() == [[0, 0, 0, 0, 0, -0.5, -0.5]]
    assert builder(*SELF_CORRECT).build([group]).corrections == []  # off by default
