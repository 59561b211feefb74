"""Training on episodes: a scripted policy plays self-correction; the trajectory the trainer
learns from, its per-turn rewards and its advantages are checked by hand, and nothing (loss, KL,
entropy, advantage, per-token reward) lands on an environment token."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from batch_helpers import builder
from execrl.rl.config.config import load_config
from execrl.rl.episodes import EnvConfig
from execrl.rl.episodes.builtin import _feedback_turn
from execrl.rl.objective import credit
from execrl.rl.objective.advantages import gae, return_to_go
from execrl.rl.objective.kl import ESTIMATORS
from execrl.rl.objective.losses import LossSettings, policy_loss, token_mean
from execrl.rl.rollout.episode_sources import episode_scored
from execrl.rl.update.batch_builder import BatchBuilder, token_rewards_of

from .conftest import LOGPROB, play
from .test_environments import ADD, PROMPT, RIGHT, WRONG


def builder_for(algorithm: str, *extra: str, keep_idle_rows: bool = True) -> BatchBuilder:
    """The batch builder of a group of two under `algorithm` (no model: no reference), its
    rows read by position: rows of advantage 0 kept unless told."""
    return builder(f"rl.algorithm='{algorithm}'", "rl.group_size=2", *extra,
                   keep_idle_rows=keep_idle_rows)  # fmt: skip


def fixed_then_failed(scorer, tokenizer, turn_reward: str = "final", discount: float = 1.0):
    """Two episodes of one group: WRONG then RIGHT (fixed at turn 2), and WRONG twice."""
    env = EnvConfig("self_correct", max_turns=2, turn_reward=turn_reward, turn_discount=discount)
    policy, fixed = play(scorer, tokenizer, env, [WRONG, RIGHT], ADD)
    _, failed = play(scorer, tokenizer, env, [WRONG, WRONG], ADD)
    scored = [episode_scored(0, ADD, e, discount, scorer) for e in (fixed, failed)]
    return policy, scored


def layout(policy, tokenizer):
    """(completion ids, policy mask) of WRONG, feedback, RIGHT after the prompt, by hand."""
    feedback = (
        "Your code failed a visible test (prompt examples, test 1).\n"
        "Test: add(1, 2)\nExpected: 3\nYour code returned: -1"
    )
    env_ids = tokenizer.encode(_feedback_turn(ADD, feedback).raw, add_special_tokens=False)
    wrong, right = policy.ids(WRONG), policy.ids(RIGHT)
    mask = [1] * len(wrong) + [0] * len(env_ids) + [1] * len(right)
    return wrong + env_ids + right, mask, len(wrong), len(env_ids)


def test_hand_computed_compact_expand_and_turn_rewards():
    mask = torch.tensor([[1.0, 1, 0, 0, 1], [1, 0, 1, 0, 0]])
    values = torch.tensor([[1.0, 2, 3, 4, 5], [6, 7, 8, 9, 10]])
    packed = credit.compact(values, mask)
    assert packed.tolist() == [[1, 2, 5], [6, 8, 0]]
    assert credit.expand(packed, mask).tolist() == [[1, 2, 0, 0, 5], [6, 0, 8, 0, 0]]
    # turn 0 ends on token 1, turn 1 on token 4; gamma_turn 0.5: 0.5^1 * 1.0 on token 4
    assert credit.turn_token_rewards(5, (1, 4), (0.25, 1.0), 0.5).tolist() == [0, 0.25, 0, 0, 0.5]
    assert credit.discounted_return((0.25, 1.0), 0.5) == 0.75
    with pytest.raises(ValueError, match="outside"):
        credit.turn_token_rewards(3, (5,), (1.0,), 1.0)


def test_an_episode_becomes_the_exact_tokens_mask_and_turn_rewards(scorer, tokenizer):
    policy, (fixed, failed) = fixed_then_failed(scorer, tokenizer)
    ids, mask, n_wrong, n_env = layout(policy, tokenizer)
    assert fixed.completion.prompt_ids.tolist() == tokenizer.encode(PROMPT)
    assert fixed.completion.token_ids.tolist() == ids
    assert fixed.turns.policy_mask.tolist() == mask
    assert fixed.completion.logprobs.tolist() == [LOGPROB if m else 0.0 for m in mask]
    assert fixed.turns.ends == (n_wrong - 1, len(ids) - 1)
    assert fixed.turns.rewards == (0.0, 1.0) and fixed.score == 1.0 and fixed.passed
    assert fixed.turns.passed_by_turn == (False, True)
    assert fixed.policy_tokens == sum(mask)
    assert failed.score == 0.0 and failed.turns.passed_by_turn == (False, False)


def test_grpo_advantages_over_episodes_by_hand_and_zero_on_environment_tokens(scorer, tokenizer):
    policy, scored = fixed_then_failed(scorer, tokenizer)
    _, mask, _, _ = layout(policy, tokenizer)
    [batch] = builder_for("grpo").build([scored]).batches
    # returns 1 and 0: mean 0.5, unbiased std sqrt(0.5): advantages +-0.5 / sqrt(0.5)
    a = 0.5 / (math.sqrt(0.5) + 1e-4)
    m = torch.tensor(mask, dtype=torch.float32)
    t = len(mask)
    assert torch.allclose(batch.advantages[0, :t], a * m)
    assert (batch.advantages[0, :t][m == 0] == 0).all()  # no advantage on environment tokens
    assert torch.equal(batch.mask[0, :t], m)  # the loss mask: the policy's tokens only
    failed_mask = scored[1].turns.policy_mask
    assert torch.allclose(batch.advantages[1, : len(failed_mask)], -a * failed_mask)


def test_credit_from_turn_2_trains_the_correction_and_never_the_first_attempt(scorer, tokenizer):
    """credit.from_turn = 2 (SCoRe's stage I): the same returns and group baseline, but the
    first attempt's tokens get advantage 0 in both episodes; the correction's get +-a."""
    policy, scored = fixed_then_failed(scorer, tokenizer)
    _, mask, n_wrong, n_env = layout(policy, tokenizer)
    env = "env.name='self_correct'"
    lr = builder_for("grpo", env, "credit.from_turn=2", "credit.held_kl_coef=0.5")
    [batch] = lr.build([scored]).batches
    a = 0.5 / (math.sqrt(0.5) + 1e-4)
    second = torch.tensor([0.0] * (n_wrong + n_env) + [1.0] * (len(mask) - n_wrong - n_env))
    assert torch.allclose(batch.advantages[0, : len(mask)], a * second)
    failed = scored[1].turns
    expected = -a * failed.policy_mask * (torch.arange(len(failed.policy_mask)) > failed.ends[0])
    assert torch.allclose(batch.advantages[1, : len(failed.policy_mask)], expected)
    assert (batch.advantages[:, :n_wrong] == 0).all() and batch.advantages[0].abs().sum() > 0
    assert torch.equal(batch.mask[0, : len(mask)], torch.tensor(mask, dtype=torch.float32))
    # the held first attempt carries the KL coefficient, and nothing else does
    held = torch.tensor([0.5] * n_wrong + [0.0] * (len(mask) - n_wrong))
    assert torch.equal(batch.kl_coef_tokens[0, : len(mask)], held)
    assert batch.kl_coef_tokens.sum() == 0.5 * (n_wrong + scored[1].turns.ends[0] + 1)
    # an episode that ended after one turn has nothing to train; turns are counted from 1
    assert credit.from_turn(4, (1,), 2).tolist() == [0, 0, 0, 0]
    assert credit.from_turn(5, (1, 4), 2).tolist() == [0, 0, 1, 1, 1]
    assert credit.from_turn(5, (1, 4), 1).tolist() == [1, 1, 1, 1, 1]


def test_reached_baseline_compares_corrections_with_corrections(scorer, tokenizer):
    """credit.baseline = "reached": a group of three, one right at once (return 1, nothing
    to train), one fixed at turn 2 (1), one failed twice (0). Over the whole group the baseline
    is 2/3 and the corrections get +1/3 and -2/3 over the std (a net push down); over the two
    that reached turn 2 it is 1/2, and they get +-0.5 / sqrt(0.5)."""
    env = EnvConfig("self_correct", max_turns=2)
    _, at_once = play(scorer, tokenizer, env, [RIGHT], ADD)
    right = episode_scored(0, ADD, at_once, 1.0, scorer)
    assert len(right.turns.ends) == 1 and right.score == 1.0
    _, (fixed, failed) = fixed_then_failed(scorer, tokenizer)
    group = [right, fixed, failed]
    held = ["env.name='self_correct'", "credit.from_turn=2", "rl.group_size=3"]

    def correction_advantages(*extra: str) -> list[float]:
        [batch] = builder_for("grpo", *held, *extra).build([group]).batches
        assert (batch.advantages[0] == 0).all()  # the first-turn pass: no advantage either way
        return [float(batch.advantages[i, s.turns.ends[1]]) for i, s in ((1, fixed), (2, failed))]

    std = math.sqrt(1 / 3) + 1e-4
    assert correction_advantages() == pytest.approx([(1 / 3) / std, -(2 / 3) / std], abs=1e-5)
    a = 0.5 / (math.sqrt(0.5) + 1e-4)
    assert correction_advantages("credit.baseline='reached'") == pytest.approx([a, -a], abs=1e-5)
    assert credit.reached([1, 2, 3], 2).tolist() == [False, True, True]


def test_reinforce_pp_return_reaches_the_first_turn_across_the_feedback(scorer, tokenizer):
    """The token-level return skips the environment's tokens: turn 1's tokens get the reward
    earned at turn 2 (a naive return-to-go would stop at the first masked token)."""
    policy, scored = fixed_then_failed(scorer, tokenizer, turn_reward="improvement")
    _, mask, n_wrong, _ = layout(policy, tokenizer)
    lr = builder_for("reinforce_pp")
    inputs = lr.advantage_inputs(scored, [], [])
    rewards = inputs.token_rewards[0, : len(mask)]
    assert rewards.nonzero().flatten().tolist() == [len(mask) - 1]  # improvement 0, then +1
    assert (rewards[torch.tensor(mask) == 0] == 0).all()  # no per-token reward on env tokens
    [batch] = lr.build([scored]).batches
    adv = batch.advantages[0, : len(mask)]
    # every policy token of the fixed episode has return 1; the failed one's have 0
    assert adv[0] == adv[n_wrong - 1] == adv[len(mask) - 1] > 0
    assert (adv[torch.tensor(mask) == 0] == 0).all()
    naive = return_to_go(inputs.token_rewards, inputs.mask)[0]
    assert naive[0] == 0  # what the compaction fixes


def test_gae_over_an_episode_equals_gae_over_its_policy_tokens_alone():
    mask = torch.tensor([[1.0, 1, 0, 0, 1, 1]])
    rewards = torch.tensor([[0.0, 0.3, 0, 0, 0, 1.0]])
    values = torch.tensor([[0.1, 0.2, 9.0, 9.0, 0.4, 0.5]])  # env-token values must not count
    adv, _ = gae(credit.compact(rewards, mask), credit.compact(values, mask),
                 credit.compact(mask, mask), 0.9, 0.8)  # fmt: skip
    dense, _ = gae(torch.tensor([[0.0, 0.3, 0, 1.0]]), torch.tensor([[0.1, 0.2, 0.4, 0.5]]),
                   torch.ones(1, 4), 0.9, 0.8)  # fmt: skip
    assert torch.allclose(credit.expand(adv, mask)[0, [0, 1, 4, 5]], dense[0])
    assert (credit.expand(adv, mask)[0, 2:4] == 0).all()


def test_turn_discount_weighs_a_later_fix_less(scorer, tokenizer):
    _, (fixed, _) = fixed_then_failed(scorer, tokenizer, discount=0.5)
    assert fixed.score == pytest.approx(0.5)  # 0.5^1 * 1.0: fixed at the second turn
    rewards = token_rewards_of(fixed)
    assert rewards.sum().item() == pytest.approx(0.5)


def test_kl_in_reward_never_lands_on_environment_tokens(scorer, tokenizer):
    policy, scored = fixed_then_failed(scorer, tokenizer)
    _, mask, _, _ = layout(policy, tokenizer)
    lr = builder_for("reinforce_pp", "rl.kl_coef=0.5", "rl.kl_in='reward'")
    # a reference that disagrees everywhere: the KL term is nonzero on every token
    ref = [torch.full((s.completion.n_tokens,), -3.0) for s in scored]
    rewards = lr.advantage_inputs(scored, ref, []).token_rewards[0, : len(mask)]
    env = torch.tensor(mask) == 0
    assert (rewards[env] == 0).all()
    assert (rewards[~env] != 0).any()


def test_loss_kl_and_entropy_gradients_vanish_on_environment_tokens(scorer, tokenizer):
    policy, scored = fixed_then_failed(scorer, tokenizer)
    _, mask, _, _ = layout(policy, tokenizer)
    [batch] = builder_for("grpo").build([scored]).batches
    batch = replace(batch, ref_logp=torch.full_like(batch.mask, -5.0))  # KL on every position
    logp = torch.full_like(batch.mask, -1.0, requires_grad=True)
    entropy = torch.full_like(batch.mask, 2.0, requires_grad=True)
    settings = LossSettings(0.2, 0.28, kl_coef=0.3, entropy_coef=0.1, vf_coef=0.0,
                            value_clip=0.2, tis_cap=2.0)  # fmt: skip
    parts = policy_loss(batch, logp, entropy, None, ESTIMATORS["k3"], token_mean, 10.0, settings)
    parts.total.backward()
    env = torch.zeros_like(batch.mask, dtype=torch.bool)
    env[0, : len(mask)] = torch.tensor(mask) == 0
    assert env.any()
    assert (logp.grad[env] == 0).all() and (entropy.grad[env] == 0).all()
    assert (logp.grad[0, : len(mask)][torch.tensor(mask) == 1] != 0).all()


@pytest.mark.parametrize("algorithm,kl_in", [("grpo", "loss"), ("reinforce_pp", "reward")])
def test_held_kl_pulls_the_held_turn_only_and_never_an_environment_token(
    scorer, tokenizer, algorithm, kl_in
):
    """SCoRe's anchor: with credit.from_turn = 2 the first attempt gets no advantage, so
    only credit.held_kl_coef moves its log-probs (the gradient is 0 there without it); a loss term
    under either rl.kl_in (in the rewards, the held turns' zero advantage would erase it)."""
    policy, scored = fixed_then_failed(scorer, tokenizer)
    _, mask, n_wrong, _ = layout(policy, tokenizer)
    settings = LossSettings(0.2, 0.28, kl_coef=0.0, entropy_coef=0.0, vf_coef=0.0,
                            value_clip=0.2, tis_cap=2.0)  # fmt: skip
    grads = []
    for held in ("0", "0.5"):
        lr = builder_for(algorithm, "env.name='self_correct'", "credit.from_turn=2",
                     f"credit.held_kl_coef={held}", f"rl.kl_in='{kl_in}'")  # fmt: skip
        [batch] = lr.build([scored]).batches
        batch = replace(batch, ref_logp=torch.full_like(batch.mask, -5.0))
        logp = torch.full_like(batch.mask, -1.0, requires_grad=True)
        entropy = torch.zeros_like(batch.mask)
        policy_loss(batch, logp, entropy, None, ESTIMATORS["k3"], token_mean, 10.0,
                    settings).total.backward()  # fmt: skip
        grads.append(logp.grad[0, : len(mask)])
    assert (grads[0][:n_wrong] == 0).all() and (grads[1][:n_wrong] != 0).all()
    env = torch.tensor(mask) == 0
    assert (grads[1][env] == 0).all()
    assert torch.equal(grads[0][n_wrong:], grads[1][n_wrong:])  # the correction: unchanged


def test_env_config_errors_are_found_when_the_config_loads():
    from execrl.rl.config.config import ConfigError

    with pytest.raises(ConfigError, match="turn_reward"):
        load_config(None, ["env.name='self_correct'", "env.turn_reward='best'"])
    with pytest.raises(ConfigError, match="token_credit"):
        load_config(None, ["env.name='self_correct'", "rl.algorithm='ppo'",
                           "reward.token_credit.enabled=true"])  # fmt: skip
    with pytest.raises(ConfigError, match="credit.from_turn must be in 1..env.max_turns"):
        load_config(None, ["env.name='self_correct'", "credit.from_turn=3"])
    with pytest.raises(ConfigError, match="held turns"):
        load_config(None, ["env.name='self_correct'", "credit.held_kl_coef=0.5"])
    with pytest.raises(ConfigError, match="needs credit.from_turn"):
        load_config(None, ["env.name='self_correct'", "credit.baseline='reached'"])
    with pytest.raises(ConfigError, match="does not have"):
        load_config(None, ["env.name='self_correct'", "credit.from_turn=2",
                           "credit.baseline='reached'", "rl.algorithm='reinforce_pp'"])  # fmt: skip
    with pytest.raises(ConfigError, match="cannot import"):
        load_config(None, ["env.name='no_such_module_xyz:Env'"])
