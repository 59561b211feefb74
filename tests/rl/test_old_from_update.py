"""pi_old from the update's own forward (one epoch, synchronous, behaviour log-probs from
another engine): the same update as with the separate no-grad forward of every row, one
forward fewer per row."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from batch_helpers import far_sample, one_update, visible_model
from execrl.rl.config.config import load_config
from execrl.rl.update.learner_settings import LearnerSettings

GROUPS = [
    [far_sample([5, 6, 7], [9, 10, 11], 1.0), far_sample([5, 6, 7], [12, 13], 0.0)],
    [far_sample([8, 9], [14, 15, 16, 17], 0.0), far_sample([8, 9], [18], 1.0)],
]


def _settings(*extra: str) -> LearnerSettings:
    config = load_config(None, ["sampling.engine='vllm'", "rl.group_size=2",
                                "rl.micro_batch_size=2", "sampling.temperature=0.9", *extra],
                         this_machine=False)  # fmt: skip
    return LearnerSettings.of(config)


def _step(model_dir, settings: LearnerSettings):
    """One step from GROUPS: (update metrics, weights after it, rows the decoder ran)."""
    model = visible_model(model_dir)
    rows: list[int] = []
    model.get_decoder().register_forward_pre_hook(
        lambda _m, _args, kwargs: rows.append(kwargs["input_ids"].shape[0]), with_kwargs=True
    )
    metrics, _ = one_update(settings, model, GROUPS)
    return metrics, [p.detach().clone() for p in model.parameters()], sum(rows)


@pytest.mark.parametrize("head", ["fused", "full"])
def test_old_logprobs_from_the_update_give_the_same_step_with_one_forward_fewer(
    tiny_model_dir, head
):
    shortcut = _settings(f"rl.logprob_head='{head}'")
    assert shortcut.recompute_old and shortcut.old_from_update
    recomputed = replace(shortcut, old_from_update=False)  # the no-grad forward of every row
    got, got_weights, got_rows = _step(tiny_model_dir, shortcut)
    want, want_weights, want_rows = _step(tiny_model_dir, recomputed)
    assert want_rows == 2 * got_rows  # every row: a forward for pi_old, then the update's
    assert got.skipped_update == 0 and got.grad_norm > 0
    for key in ("loss", "grad_norm", "kl", "entropy", "clip_frac", "engine_logprob_diff_mean",
                "engine_logprob_diff_max", "engine_tis_truncated"):  # fmt: skip
        assert getattr(got, key) == pytest.approx(getattr(want, key), rel=1e-6, abs=1e-7), key
    assert got.engine_tis_truncated is not None and got.engine_logprob_diff_mean > 0.1
    for a, b in zip(got_weights, want_weights, strict=True):
        assert torch.allclose(a, b, atol=1e-6)


def test_several_epochs_or_stale_rollouts_keep_the_separate_forward():
    assert not _settings("rl.epochs=2").old_from_update  # the weights move between epochs
    assert not _settings("rl.max_staleness=1").old_from_update  # rollouts of older weights
