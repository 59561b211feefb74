"""A batch builder without a model, for hand-derived tests of what the update learns from:
its log-probs are fixed numbers (0 unless told), and it has no reference model or critic."""

from __future__ import annotations

from dataclasses import replace

import torch

from execrl.rl.config.config import load_config
from execrl.rl.update.batch_builder import BatchBuilder
from execrl.rl.update.batch_rows import ModelTerms
from execrl.rl.update.learner_settings import LearnerSettings


def builder(*overrides: str, logp: float = 0.0, keep_idle_rows: bool = False) -> BatchBuilder:
    """The builder of the config `overrides` make, every trainer log-prob `logp`;
    `keep_idle_rows`: rows of advantage 0 stay in the batches (to read their masks)."""
    settings = LearnerSettings.of(load_config(None, list(overrides)))
    if keep_idle_rows:
        settings = replace(settings, skips_idle_rows=False)
    terms = ModelTerms(policy_logp=lambda batch: torch.full(batch.token_mask.shape, logp))
    return BatchBuilder(settings, terms, pad_id=0, device=torch.device("cpu"))


def visible_model(model_dir):
    """The tiny model at `model_dir` with weights larger than its initialisation's (seed 0), so
    two updates that differ show it."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.2 if p.dim() > 1 else 0.5)
    return model


def one_update(settings: LearnerSettings, model, groups, denominator: float | None = None):
    """Build `groups` with the model's own terms and take one AdamW step (lr 1e-2); returns
    (update metrics, the built batches). `denominator`: the batches' counted tokens if None."""
    from execrl.rl.update.batch_rows import model_terms
    from execrl.rl.update.trainer import Learner

    terms = model_terms(model, None, None, settings.temperature, settings.logprob_head)
    built = BatchBuilder(settings, terms, pad_id=0, device=torch.device("cpu")).build(groups)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    learner = Learner(settings, model, None, optimizer, scheduler)
    if denominator is None:
        denominator = float(sum(b.mask.sum() for b in built.batches))
    return learner.update(built.batches, denominator), built.batches


def far_sample(prompt: list[int], tokens: list[int], score: float):
    """A scored one-turn sample of a task `f(1) == 2`, its engine log-probs (mu) -1.5 on every
    token: far from a tiny model's pi, so TIS weights act."""
    from execrl.models.engines.sampling import Completion
    from execrl.rewards.result import RewardResult
    from execrl.rewards.scoring.scorer import build_sample
    from execrl.rl.rollout.scored import Scored
    from execrl.tasks import CallTests, Task

    task = Task(id="inc", prompt="Write f.", tests=CallTests(((1,),), (2,)), entry_point="f")
    completion = Completion(0, "x", torch.tensor(prompt), torch.tensor(tokens),
                            torch.full((len(tokens),), -1.5), "eos")  # fmt: skip
    return Scored.answer(0, completion, RewardResult(score), build_sample(task, "x"))
