"""The policy update of `execrl train`: `epochs` passes of the policy loss over a step's batches.

The last stage of the step (`rl.run.train_step`): the batch builder (`rl.update.batch_builder`) has
turned the kept groups into `Batch`es of (B, T) tensors fixed during the update (old and
reference log-probs, old values, advantages, value targets, the loss mask);
`Learner.update(batches, denominator)` runs their micro-batches of `losses.policy_loss`,
normalised by the global batch's count, so accumulation and several processes give the same
gradient as one big batch. The Learner is given a `LearnerSettings` record
(`rl.update.learner_settings`), never the whole run config.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

import torch

from execrl.rl.objective import algorithms, kl
from execrl.rl.objective.logprobs import resolve_head, token_stats
from execrl.rl.objective.losses import Batch, policy_loss
from execrl.rl.objective.tis import LogprobGap, logprob_gap
from execrl.rl.parallel import dist
from execrl.rl.update.learner_settings import LearnerSettings


@dataclass(slots=True)
class UpdateMetrics:
    """What the update reports: over the tokens that entered the loss, all processes."""

    loss: float = 0.0  # the summed micro-batch losses of the last epoch
    value_loss: float = 0.0  # PPO critic loss (aggregated like the policy loss); 0 otherwise
    clip_frac: float = 0.0
    kl: float = 0.0
    entropy: float = 0.0
    grad_norm: float = 0.0
    lr: float = 0.0
    skipped_update: float = 0.0  # 1: nothing counted, or the gradient was not finite
    # engine != trainer (vLLM): |log pi_old - log mu| over this process's tokens, and the
    # fraction of tokens whose importance ratio the cap truncated (`rl.objective.tis`)
    engine_logprob_diff_mean: float | None = None
    engine_logprob_diff_max: float | None = None
    engine_tis_truncated: float | None = None
    # task index -> (summed KL, tokens) over the last epoch, all processes; None without a
    # reference model (`metrics.source_kl` turns it into source/<name>/kl)
    kl_by_task: dict[int, tuple[float, float]] | None = None

    def row(self) -> dict[str, float]:
        out = asdict(self)
        out.pop("kl_by_task")
        for key in ("logprob_diff_mean", "logprob_diff_max", "tis_truncated"):
            value = out.pop(f"engine_{key}")
            if value is not None:
                out[f"engine/{key}"] = value
        return out


@dataclass(slots=True)
class _Sums:
    """Per-epoch sums over micro-batches, all-reduced across processes as one tensor."""

    loss: float = 0.0
    value_loss: float = 0.0
    clipped: float = 0.0
    kl: float = 0.0
    entropy: float = 0.0
    tokens: float = 0.0

    def all_reduced(self) -> _Sums:
        return _Sums(*dist.all_reduce_sum(torch.tensor(list(asdict(self).values()))).tolist())


class Learner:
    """The policy update: pure math comes from `rl.objective.losses` and `rl.objective.kl`; what it
    reads of the run's config is `settings`; its batches come from `rl.update.batch_builder`."""

    def __init__(self, settings: LearnerSettings, model, value_head, optimizer, scheduler,
                 strategy: dist.Strategy | None = None) -> None:  # fmt: skip
        self.settings, self.model, self.value_head = settings, model, value_head
        self.optimizer, self.scheduler = optimizer, scheduler
        # how the processes share the model (`rl.parallel.dist`): whole copies, or FSDP's shards
        self.strategy = strategy or dist.Replicated()
        self.aggregate = algorithms.aggregator(settings.loss_agg, settings.max_new_tokens)
        self.kl = None if settings.kl_estimator is None else kl.ESTIMATORS[settings.kl_estimator]
        self.device = next(model.parameters()).device
        # the LM head's path (`rl.objective.logprobs`), once: an entropy bonus needs the full one
        self.head = resolve_head(model, settings.logprob_head,
                                 entropy_grad=bool(settings.loss.entropy_coef))  # fmt: skip

    def update(self, batches: list[Batch], denominator: float) -> UpdateMetrics:
        """`epochs` passes over the micro-batches; one optimizer step per pass."""
        if denominator == 0:
            return UpdateMetrics(skipped_update=1.0)
        params = [p for p in self.model.parameters() if p.requires_grad]
        if self.value_head is not None:
            params += list(self.value_head.parameters())
        for _ in range(self.settings.epochs):
            self.optimizer.zero_grad(set_to_none=True)
            sums = _Sums()
            by_task: dict[int, list[float]] = {}
            used = [self._micro_step(batch, denominator, sums, by_task)
                    for batch in self.strategy.balanced(batches)]  # fmt: skip
            sums = sums.all_reduced()
            grad_norm = self.strategy.reduce_and_clip(params, self.settings.grad_clip)
            if not math.isfinite(grad_norm):
                self.optimizer.zero_grad(set_to_none=True)
                return UpdateMetrics(skipped_update=1.0, grad_norm=float("nan"))
            self.optimizer.step()
        self.scheduler.step()
        n_tok = max(1.0, sums.tokens)
        gap = _engine_gap(used, self.settings.loss.tis_cap)
        return UpdateMetrics(
            loss=sums.loss, value_loss=sums.value_loss, clip_frac=sums.clipped / n_tok,
            kl=sums.kl / n_tok, entropy=sums.entropy / n_tok, grad_norm=grad_norm,
            lr=self.scheduler.get_last_lr()[0],
            engine_logprob_diff_mean=None if gap is None else gap.mean,
            engine_logprob_diff_max=None if gap is None else gap.max,
            engine_tis_truncated=None if gap is None else gap.truncated,
            kl_by_task=_all_tasks(by_task) if self.kl is not None else None,
        )  # fmt: skip

    def _micro_step(self, batch: Batch, denominator: float, sums: _Sums,
                    by_task: dict[int, list[float]]) -> Batch:  # fmt: skip
        """One micro-batch's forward and backward; returns the batch as the loss read it."""
        stats = token_stats(self.model, batch.sequences, self.settings.temperature, entropy=True,
                            entropy_grad=bool(self.settings.loss.entropy_coef),
                            hidden=self.value_head is not None, head=self.head)  # fmt: skip
        if batch.old_logp is None:  # pi_old is this forward (`LearnerSettings.old_from_update`)
            batch = replace(batch, old_logp=stats.logp.detach() * batch.sequences.token_mask)
        values = (
            self.value_head(stats.hidden.float()).squeeze(-1)  # (B, T)
            if self.value_head is not None
            else None
        )
        parts = policy_loss(batch, stats.logp, stats.entropy, values, self.kl, self.aggregate,
                            denominator, self.settings.loss)  # fmt: skip
        parts.total.backward()
        m = batch.mask.bool()
        sums.loss += parts.total.item()
        sums.value_loss += parts.value_loss.item()
        sums.clipped += parts.clipped[m].sum().item()
        sums.kl += parts.kl[m].sum().item()
        sums.entropy += stats.entropy.detach()[m].sum().item()
        sums.tokens += m.sum().item()
        if self.kl is not None and batch.tasks is not None:
            kl_rows, tokens = (parts.kl * m).sum(-1).tolist(), m.sum(-1).tolist()  # (B,) each
            for task, kl_sum, n in zip(batch.tasks.tolist(), kl_rows, tokens, strict=True):
                entry = by_task.setdefault(int(task), [0.0, 0.0])
                entry[0] += kl_sum
                entry[1] += n
        return batch


def _all_tasks(by_task: dict[int, list[float]]) -> dict[int, tuple[float, float]]:
    """This process's per-task (KL sum, tokens) merged with every other process's."""
    out: dict[int, tuple[float, float]] = {}
    for part in dist.all_gather_objects(by_task):
        for task, (kl_sum, n) in part.items():
            before = out.get(task, (0.0, 0.0))
            out[task] = (before[0] + kl_sum, before[1] + n)
    return out


def _engine_gap(batches: list[Batch], cap: float) -> LogprobGap | None:
    """The engine/trainer log-prob gap over every counted token of the batches, or None when
    the rollouts came from the trainer's own forward."""
    pairs = [
        (b.old_logp, b.engine_logp, b.mask.bool()) for b in batches if b.engine_logp is not None
    ]
    if not pairs:
        return None
    trainer = torch.cat([old[real] for old, _, real in pairs])[None]  # (1, N)
    engine = torch.cat([mu[real] for _, mu, real in pairs])[None]  # (1, N)
    return logprob_gap(trainer, engine, torch.ones_like(trainer), cap)
