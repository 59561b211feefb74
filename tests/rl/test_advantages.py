"""Hand-derived tests of the advantage estimators; each expected value is worked out in a comment."""

import math

import pytest
import torch

from execrl.rl.objective import advantages as A


def test_grpo_normalises_by_group_std():
    # group [1, 0, 0, 1]: mean 0.5, unbiased var = 4 * 0.25 / 3 = 1/3, std = 0.57735
    # advantages = +-0.5 / 0.57735 = +-0.866025
    adv = A.grpo(torch.tensor([1.0, 0, 0, 1]), group_size=4, eps=0.0)
    s = 0.5 / math.sqrt(1 / 3)
    assert torch.allclose(adv, torch.tensor([s, -s, -s, s]), atol=1e-6)


def test_grpo_constant_group_gives_zero():
    # group [1, 1]: every reward equals the mean, so (r - mean) = 0 whatever the std
    adv = A.grpo(torch.tensor([1.0, 1.0, 0.0, 1.0]), group_size=2)
    assert adv[:2].tolist() == [0.0, 0.0]
    assert adv[2] < 0 < adv[3]


def test_grpo_ignores_masked_samples():
    # valid rewards of the group are 1, 0, 1: mean 2/3, var = (1/9 + 4/9 + 1/9) / 2 = 1/3
    # r0 = (1/3) / 0.57735 = 0.57735, r1 = -(2/3) / 0.57735 = -1.1547, masked r2 -> 0
    adv = A.grpo(torch.tensor([1.0, 0, 0, 1]), 4, valid=torch.tensor([1, 1, 0, 1]), eps=0.0)
    assert torch.allclose(adv, torch.tensor([0.57735, -1.1547, 0.0, 0.57735]), atol=1e-4)


def test_dr_grpo_has_no_std():
    # [1, 0, 0, 1] - 0.5 ; [3, 1] - 2
    adv = A.dr_grpo(torch.tensor([1.0, 0, 0, 1]), 4)
    assert adv.tolist() == [0.5, -0.5, -0.5, 0.5]
    assert A.dr_grpo(torch.tensor([3.0, 1.0]), 2).tolist() == [1.0, -1.0]


def test_rloo_leave_one_out():
    # r0 = 1 - mean(0, 0, 1) = 2/3 ; r1 = 0 - mean(1, 0, 1) = -2/3  (= G/(G-1) * (r - mean))
    adv = A.rloo(torch.tensor([1.0, 0, 0, 1]), 4)
    assert torch.allclose(adv, torch.tensor([2 / 3, -2 / 3, -2 / 3, 2 / 3]))


def test_rloo_with_masked_member():
    # valid are r0=1, r1=0, r3=1: r0 - mean(0, 1) = 0.5 ; r1 - mean(1, 1) = -1 ; masked -> 0
    adv = A.rloo(torch.tensor([1.0, 0, 0, 1]), 4, valid=torch.tensor([1, 1, 0, 1]))
    assert torch.allclose(adv, torch.tensor([0.5, -1.0, 0.0, 0.5]))


def test_group_size_must_divide_batch():
    with pytest.raises(ValueError, match="group size 3"):
        A.grpo(torch.zeros(4), 3)


def test_reinforce_pp_global_batch_normalisation():
    # row 0: reward 1 on its last token -> returns [1, 1, 1]; row 1: two tokens, reward 0 -> [0, 0]
    # 5 valid tokens: mean 3/5 = 0.6, var = (3 * 0.4^2 + 2 * 0.6^2) / 5 = 0.24, std = 0.489898
    # row 0: 0.4 / 0.489898 = 0.816497 ; row 1: -0.6 / 0.489898 = -1.224745 ; padding -> 0
    rewards = torch.tensor([[0.0, 0, 1], [0, 0, 0]])
    mask = torch.tensor([[1.0, 1, 1], [1, 1, 0]])
    adv = A.reinforce_pp(rewards, mask)
    expected = torch.tensor([[0.816497] * 3, [-1.224745, -1.224745, 0.0]])
    assert torch.allclose(adv, expected, atol=1e-5)


def test_return_to_go_discounted():
    # r = [1, 2, 3], gamma 0.5: G2 = 3, G1 = 2 + 1.5 = 3.5, G0 = 1 + 1.75 = 2.75
    g = A.return_to_go(torch.tensor([[1.0, 2, 3]]), torch.ones(1, 3), gamma=0.5)
    assert g.tolist() == [[2.75, 3.5, 3.0]]


def test_gae_by_hand():
    # row 0: r = [0, 1], V = [0.5, 0.8], gamma 1, lam 0.5
    #   t=1: delta = 1 + 0 (terminal) - 0.8 = 0.2 -> A1 = 0.2
    #   t=0: delta = 0 + 0.8 - 0.5 = 0.3 -> A0 = 0.3 + 0.5 * 0.2 = 0.4 ; returns = A + V = [0.9, 1.0]
    # row 1: only t=0 valid: r = 1, V = 0.25 -> A0 = 1 - 0.25 = 0.75 ; the padded token is ignored
    rewards = torch.tensor([[0.0, 1.0], [1.0, 5.0]])
    values = torch.tensor([[0.5, 0.8], [0.25, 9.0]])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    adv, ret = A.gae(rewards, values, mask, gamma=1.0, lam=0.5)
    assert torch.allclose(adv, torch.tensor([[0.4, 0.2], [0.75, 0.0]]))
    assert torch.allclose(ret, torch.tensor([[0.9, 1.0], [1.0, 0.0]]))


def test_gae_lambda_one_is_return_minus_value():
    # lam = 1, gamma = 1: A_t = G_t - V_t, with G = [1, 1] for reward 1 on the last token
    adv, _ = A.gae(
        torch.tensor([[0.0, 1.0]]), torch.tensor([[0.3, 0.6]]), torch.ones(1, 2), 1.0, 1.0
    )
    assert torch.allclose(adv, torch.tensor([[0.7, 0.4]]))
