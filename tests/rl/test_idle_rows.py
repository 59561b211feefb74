"""Rows whose advantage is 0 everywhere are left out of the update when the advantage term is
the loss's only term: the same step (loss, gradient norm, weights) with fewer rows run."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from batch_helpers import far_sample, one_update, visible_model
from execrl.rl.config.config import load_config
from execrl.rl.update.learner_settings import LearnerSettings

GROUPS = [  # the middle group's samples all scored alike: zero advantage, nothing to learn
    [far_sample([5, 6, 7], [9, 10, 11], 1.0), far_sample([5, 6, 7], [12, 13], 0.0)],
    [far_sample([4, 3], [19, 20, 21, 22, 23], 1.0), far_sample([4, 3], [24, 25], 1.0)],
    [far_sample([8, 9], [14, 15, 16, 17], 0.0), far_sample([8, 9], [18], 1.0)],
]


def _settings(*extra: str) -> LearnerSettings:
    config = load_config(None, ["rl.group_size=2", "rl.micro_batch_size=2",
                                "sampling.temperature=0.9", *extra],
                         this_machine=False)  # fmt: skip
    return LearnerSettings.of(config)


def _step(model_dir, settings: LearnerSettings):
    """One step from GROUPS: (update metrics, weights after it, rows the update ran)."""
    model = visible_model(model_dir)
    # the denominator of every kept row, as `train_step` counts it before building
    denominator = float(sum(len(s.completion.token_ids) for g in GROUPS for s in g))
    metrics, batches = one_update(settings, model, GROUPS, denominator)
    rows = sum(len(b.sequences.input_ids) for b in batches)
    return metrics, [p.detach().clone() for p in model.parameters()], rows


@pytest.mark.parametrize("engine", ["loop", "vllm"])  # vllm: TIS weights in the loss
def test_rows_with_zero_advantage_are_left_out_and_the_step_is_the_same(tiny_model_dir, engine):
    skipping = _settings(f"sampling.engine='{engine}'")
    assert skipping.skips_idle_rows
    every_row = replace(skipping, skips_idle_rows=False)
    got, got_weights, got_rows = _step(tiny_model_dir, skipping)
    want, want_weights, want_rows = _step(tiny_model_dir, every_row)
    assert (got_rows, want_rows) == (4, 6)  # the alike group's two rows are not run
    assert got.skipped_update == 0 and got.grad_norm > 0
    assert got.loss == pytest.approx(want.loss, rel=1e-6, abs=1e-8)
    assert got.grad_norm == pytest.approx(want.grad_norm, rel=1e-6)
    for a, b in zip(got_weights, want_weights, strict=True):
        assert torch.allclose(a, b, atol=1e-6)


def test_a_loss_with_terms_beyond_the_advantage_trains_every_row():
    assert not _settings("rl.kl_coef=0.01").skips_idle_rows  # the KL reaches every token
    assert not _settings("rl.entropy_coef=0.01").skips_idle_rows
    assert not _settings("rl.algorithm='ppo'").skips_idle_rows  # the critic's value loss
    assert _settings("rl.algorithm='rloo'").skips_idle_rows
