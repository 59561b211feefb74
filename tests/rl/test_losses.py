"""Hand-derived tests of the clipped surrogate, value loss, aggregations, KL and entropy."""

import math

import torch

from execrl.rl.objective import kl, losses
from execrl.rl.objective.logprobs import entropy_from_logprobs


def _case(ratio: float, adv: float, eps_low=0.2, eps_high=0.28):
    logp = torch.tensor([[math.log(ratio)]], requires_grad=True)
    loss, clipped = losses.clipped_surrogate(
        logp, torch.zeros(1, 1), torch.tensor([[adv]]), eps_low, eps_high
    )
    loss.sum().backward()
    return loss.item(), bool(clipped.item()), logp.grad.item()


def test_clip_higher_caps_positive_advantage_at_one_plus_eps_high():
    # ratio 1.5, A = +1: min(1.5, 1.28) = 1.28 -> loss -1.28, clipped, no gradient
    loss, clipped, grad = _case(1.5, 1.0)
    assert math.isclose(loss, -1.28, rel_tol=1e-6) and clipped and grad == 0.0


def test_large_ratio_negative_advantage_is_not_clipped():
    # ratio 1.5, A = -1: min(-1.5, -1.28) = -1.5 -> loss 1.5, the gradient flows (d/dlogp = 1.5)
    loss, clipped, grad = _case(1.5, -1.0)
    assert math.isclose(loss, 1.5, rel_tol=1e-6) and not clipped
    assert math.isclose(grad, 1.5, rel_tol=1e-6)


def test_small_ratio_positive_advantage_is_not_clipped():
    # ratio 0.5, A = +1: min(0.5, 0.8) = 0.5 -> loss -0.5, gradient -0.5
    loss, clipped, grad = _case(0.5, 1.0)
    assert math.isclose(loss, -0.5, rel_tol=1e-6) and not clipped
    assert math.isclose(grad, -0.5, rel_tol=1e-6)


def test_small_ratio_negative_advantage_clipped_at_one_minus_eps_low():
    # ratio 0.5, A = -1: min(-0.5, -0.8) = -0.8 -> loss 0.8, clipped
    loss, clipped, grad = _case(0.5, -1.0)
    assert math.isclose(loss, 0.8, rel_tol=1e-6) and clipped and grad == 0.0


def test_inside_the_range_is_plain_policy_gradient():
    # ratio 1.1, A = 2 -> loss -2.2
    loss, clipped, _ = _case(1.1, 2.0)
    assert math.isclose(loss, -2.2, rel_tol=1e-6) and not clipped


def test_value_loss_takes_the_worse_of_clipped_and_unclipped():
    # V = 1, V_old = 0.5, R = 2, clip 0.2: V_clip = 0.7; max(1, 1.69) / 2 = 0.845
    out = losses.clipped_value_loss(torch.tensor([1.0]), torch.tensor([0.5]), torch.tensor([2.0]))
    assert math.isclose(out.item(), 0.845, rel_tol=1e-6)


LOSS = torch.tensor([[1.0, 2, 3], [4, 0, 0]])
MASK = torch.tensor([[1.0, 1, 1], [1, 0, 0]])


def test_token_mean():
    # (1 + 2 + 3 + 4) / 4 tokens = 2.5 ; with a global denominator of 8: 10 / 8
    assert losses.token_mean(LOSS, MASK).item() == 2.5
    assert losses.token_mean(LOSS, MASK, denominator=8).item() == 1.25


def test_seq_mean():
    # (6 / 3 + 4 / 1) / 2 sequences = 3
    assert losses.seq_mean(LOSS, MASK).item() == 3.0


def test_seq_mean_constant_normaliser():
    # 10 / (L=4 * 2 sequences) = 1.25
    assert losses.seq_mean_constant(LOSS, MASK, normaliser=4).item() == 1.25


def test_global_denominators_make_micro_batches_add_up():
    # token-mean over the whole batch equals the sum of micro-batches with the global count (4)
    parts = [losses.token_mean(LOSS[i : i + 1], MASK[i : i + 1], denominator=4) for i in range(2)]
    assert sum(p.item() for p in parts) == losses.token_mean(LOSS, MASK).item()
    parts = [losses.seq_mean(LOSS[i : i + 1], MASK[i : i + 1], denominator=2) for i in range(2)]
    assert sum(p.item() for p in parts) == losses.seq_mean(LOSS, MASK).item()


def test_kl_estimators_by_hand():
    # pi = 0.5, pi_ref = 0.25: k1 = log 2 = 0.693147 ; k2 = (log 2)^2 / 2 = 0.240227
    # k3 = (r - 1) - log r with r = 0.5: -0.5 + 0.693147 = 0.193147
    logp, ref = torch.tensor([math.log(0.5)]), torch.tensor([math.log(0.25)])
    assert math.isclose(kl.k1(logp, ref).item(), 0.693147, rel_tol=1e-5)
    assert math.isclose(kl.k2(logp, ref).item(), 0.240227, rel_tol=1e-5)
    assert math.isclose(kl.k3(logp, ref).item(), 0.193147, rel_tol=1e-5)


def test_kl_estimators_vanish_at_equal_policies_and_k3_is_nonnegative():
    x = torch.linspace(-3, 0, 7)
    for name, fn in kl.ESTIMATORS.items():
        assert fn(x, x).abs().max().item() == 0.0, name
    assert (kl.k3(x, x.flip(0)) >= 0).all()


def test_entropy():
    # uniform over 2: log 2 ; p = [0.75, 0.25]: 0.75 * 0.287682 + 0.25 * 1.386294 = 0.562335
    logits = torch.tensor([[[0.0, 0.0], [math.log(0.75), math.log(0.25)]]])
    h = entropy_from_logprobs(torch.log_softmax(logits, -1))
    assert torch.allclose(h, torch.tensor([[math.log(2), 0.562335]]), atol=1e-6)


def test_the_entropy_metric_and_the_entropy_bonus_are_the_same_numbers():
    # the metric (no grad) multiplies in place to save a (B, T, V) temporary: bit for bit the
    # bonus's value, so no logged figure moved
    logp = torch.log_softmax(torch.randn(3, 5, 97, generator=torch.Generator().manual_seed(0)), -1)
    bonus = entropy_from_logprobs(logp.clone().requires_grad_(True))
    assert bonus.requires_grad and torch.equal(entropy_from_logprobs(logp), bonus.detach())
