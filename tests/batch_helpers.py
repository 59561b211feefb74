"""A batch builder without a model, for hand-derived tests of what the update learns from:
its log-probs are fixed numbers (0 unless told), and it has no reference model or critic."""

from __future__ import annotations

from dataclasses import replace

import torch

from execrl.rl.batch_builder import BatchBuilder
from execrl.rl.batch_rows import ModelTerms
from execrl.rl.config import load_config
from execrl.rl.learner_settings import LearnerSettings


def builder(*overrides: str, logp: float = 0.0, keep_idle_rows: bool = False) -> BatchBuilder:
    """The builder of the config `overrides` make, every trainer log-prob `logp`;
    `keep_idle_rows`: rows of advantage 0 stay in the batches (to read their masks)."""
    settings = LearnerSettings.of(load_config(None, list(overrides)))
    if keep_idle_rows:
        settings = replace(settings, skips_idle_rows=False)
    terms = ModelTerms(policy_logp=lambda batch: torch.full(batch.token_mask.shape, logp))
    return BatchBuilder(settings, terms, pad_id=0, device=torch.device("cpu"))
