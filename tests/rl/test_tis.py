"""Truncated importance sampling: hand-derived weights and gap statistics."""

import math

import pytest
import torch

from execrl.rl.objective.tis import logprob_gap, tis_weights


def test_weights_are_the_ratio_truncated_at_the_cap_and_zero_on_padding():
    # log pi_old - log mu per token: 0, ln 1.5, ln 4
    trainer = torch.tensor([[-1.0, -1.0 + math.log(1.5), -2.0 + math.log(4.0)]])
    engine = torch.tensor([[-1.0, -1.0, -2.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0]])
    # ratios 1, 1.5, 4 -> with cap 2: 1, 1.5, 2
    w = tis_weights(trainer, engine, mask, cap=2.0)
    assert torch.allclose(w, torch.tensor([[1.0, 1.5, 2.0]]), atol=1e-6)
    # a ratio below 1 is kept as is (truncation is one-sided); padding weighs 0 even when its
    # log-probabilities are garbage (inf ratio)
    w = tis_weights(
        torch.tensor([[math.log(0.5), 100.0]]), torch.tensor([[0.0, -100.0]]),
        torch.tensor([[1.0, 0.0]]), cap=2.0,
    )  # fmt: skip
    assert torch.allclose(w, torch.tensor([[0.5, 0.0]]), atol=1e-6)
    assert torch.isfinite(w).all()


def test_weights_carry_no_gradient():
    trainer = torch.zeros(1, 2, requires_grad=True)
    w = tis_weights(trainer, torch.zeros(1, 2), torch.ones(1, 2), cap=2.0)
    assert not w.requires_grad


def test_a_cap_below_one_is_an_error():
    with pytest.raises(ValueError, match="cap must be >= 1"):
        tis_weights(torch.zeros(1, 1), torch.zeros(1, 1), torch.ones(1, 1), cap=0.5)


def test_gap_statistics_over_real_tokens_only():
    # diffs on real tokens: 0.1, -0.3, ln 3 (> ln 2: truncated); the padded 9.0 is ignored
    trainer = torch.tensor([[0.1, -0.3, math.log(3.0), 9.0]])
    engine = torch.zeros(1, 4)
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    gap = logprob_gap(trainer, engine, mask, cap=2.0)
    assert gap.mean == pytest.approx((0.1 + 0.3 + math.log(3.0)) / 3)
    assert gap.max == pytest.approx(math.log(3.0))
    assert gap.truncated == pytest.approx(1 / 3)
    assert logprob_gap(trainer, engine, torch.zeros(1, 4), cap=2.0).max == 0.0


def test_the_policy_loss_weights_each_token_by_its_truncated_ratio():
    from execrl.rl.objective.losses import Batch, LossSettings, policy_loss

    # pi_theta = pi_old (ratio 1, no clipping): token loss = -A * w; A = 1 on both tokens;
    # pi_old / mu = 1.5 and 4 -> w = 1.5 and 2 (cap 2); sum over tokens / denominator 2
    old = torch.log(torch.tensor([[0.3, 0.4]]))
    mu = torch.log(torch.tensor([[0.2, 0.1]]))
    batch = Batch(sequences=None, old_logp=old, advantages=torch.ones(1, 2),
                  mask=torch.ones(1, 2), engine_logp=mu)  # fmt: skip
    settings = LossSettings(0.2, 0.28, 0.0, 0.0, 0.5, 0.2, tis_cap=2.0)

    def token_sum(x, m, d):
        return (x * m).sum() / d

    parts = policy_loss(batch, old.clone(), torch.zeros(1, 2), None, None, token_sum, 2.0, settings)
    assert float(parts.total) == pytest.approx(-(1.5 + 2.0) / 2)
    plain = Batch(sequences=None, old_logp=old, advantages=torch.ones(1, 2), mask=torch.ones(1, 2))
    parts = policy_loss(plain, old.clone(), torch.zeros(1, 2), None, None, token_sum, 2.0, settings)
    assert float(parts.total) == pytest.approx(-1.0)  # without an engine: no weights
