"""The training loop of `execrl train`: collect groups, score them, update the policy, log.

One step: draw prompts (pass-rate control), sample `group_size` completions each, execute and
score them, drop uninformative groups and refill (DAPO dynamic sampling, bounded), compute
advantages, then `epochs` passes of clipped-surrogate updates in micro-batches whose losses are
normalised by the global batch's counts, so accumulation and several processes give the same
gradient as one big batch. Samples the reward masked never enter the loss or the statistics.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from execrl.rl import algorithms, dist, kl
from execrl.rl.config import TrainConfig
from execrl.rl.logprobs import collate, token_stats
from execrl.rl.losses import clipped_surrogate, clipped_value_loss
from execrl.rl.prompts import PromptSampler, informative
from execrl.rl.rollout import Rollouts, RolloutTimes, Scored, gather_chunks, to_summary


@dataclass
class Collected:
    """What one step gathered: this process's kept groups and every process's summaries."""

    local: list[list[Scored]]  # kept groups generated here
    summaries: list[dict[str, Any]]  # kept groups, all processes, global order
    drawn: int  # groups sampled, all rounds
    rounds: int
    times: RolloutTimes = field(default_factory=RolloutTimes)
    all_summaries: list[dict[str, Any]] = field(default_factory=list)  # kept or not


class Learner:
    """The policy update: pure math comes from `rl.advantages`, `rl.losses` and `rl.kl`."""

    def __init__(
        self, config: TrainConfig, model, reference, value_head, optimizer, scheduler
    ) -> None:
        self.c, self.model, self.reference, self.value_head = config, model, reference, value_head
        self.optimizer, self.scheduler = optimizer, scheduler
        rl = config.rl
        self.advantage = algorithms.advantage_fn(rl.algorithm, rl.gamma, rl.lam)
        agg = algorithms.default_aggregation(rl.algorithm) if rl.loss_agg == "auto" else rl.loss_agg
        self.aggregate = algorithms.aggregator(agg, config.sampling.max_new_tokens)
        self.per_token = algorithms.counts_tokens(agg)
        self.kl = kl.ESTIMATORS[rl.kl_estimator] if rl.kl_coef > 0 else None
        self.device = next(model.parameters()).device
        self.pad_id = 0

    def loss_included(self, s: Scored) -> bool:
        return s.valid and not (self.c.rl.overlong_filter and s.completion.truncated)

    def update(
        self, groups: list[list[Scored]], summaries: list[dict[str, Any]]
    ) -> dict[str, float]:
        samples = [s for g in groups for s in g]
        denominator = self._denominator(summaries)
        if denominator == 0:
            return {"skipped_update": 1.0}
        prep = self._prepare(samples)
        metrics = {"loss": 0.0, "clip_frac": 0.0, "kl": 0.0, "entropy": 0.0, "value_loss": 0.0}
        params = [p for p in self.model.parameters() if p.requires_grad]
        if self.value_head is not None:
            params += list(self.value_head.parameters())
        for _ in range(self.c.rl.epochs):
            self.optimizer.zero_grad(set_to_none=True)
            sums = torch.zeros(5)
            for lo in range(0, len(samples), self.c.rl.micro_batch_size):
                part = slice(lo, lo + self.c.rl.micro_batch_size)
                sums += self._micro_step(
                    samples[part], {k: v[part] for k, v in prep.items()}, denominator
                )
            dist.all_reduce_grads(params)
            sums = dist.all_reduce_sum(sums)
            grad_norm = torch.nn.utils.clip_grad_norm_(
                params, self.c.optim.grad_clip or float("inf")
            )
            if not math.isfinite(float(grad_norm)):
                self.optimizer.zero_grad(set_to_none=True)
                return {"skipped_update": 1.0, "grad_norm": float("nan")}
            self.optimizer.step()
        self.scheduler.step()
        n_tok = max(1.0, float(sums[4]))
        metrics.update(loss=float(sums[0]), clip_frac=float(sums[1]) / n_tok, kl=float(sums[2]) / n_tok,
                       entropy=float(sums[3]) / n_tok, grad_norm=float(grad_norm),
                       lr=self.scheduler.get_last_lr()[0], skipped_update=0.0)  # fmt: skip
        return metrics

    def _denominator(self, summaries: list[dict[str, Any]]) -> float:
        overlong = self.c.rl.overlong_filter
        included = [
            (n if self.per_token else 1)
            for g in summaries
            for v, n, t in zip(g["valid"], g["n_tokens"], g["truncated"], strict=True)
            if v and not (overlong and t) and n > 0
        ]
        return float(sum(included))

    @torch.no_grad()
    def _prepare(self, samples: list[Scored]) -> dict[str, Any]:
        """Per-sample tensors fixed during the update: old log-probs, reference log-probs,
        old values, advantages and value targets. Lists of (T_i,) tensors, sample order."""
        c = self.c
        mb = c.rl.micro_batch_size
        ref_logp, old_values = [], []
        for lo in range(0, len(samples), mb):
            part = samples[lo : lo + mb]
            batch = self._batch(part)
            lengths = [s.completion.n_tokens for s in part]
            if self.kl is not None:
                lora = self.reference is self.model
                stats = token_stats(
                    self.reference, batch, c.sampling.temperature, disable_adapter=lora
                )
                ref_logp += [stats.logp[i, :n].cpu() for i, n in enumerate(lengths)]
            if self.value_head is not None:
                stats = token_stats(self.model, batch, c.sampling.temperature, hidden=True)
                values = self.value_head(stats.hidden.float()).squeeze(-1)
                old_values += [values[i, :n].cpu() for i, n in enumerate(lengths)]
        inputs = self._advantage_inputs(samples, ref_logp, old_values)
        adv, targets = self.advantage(inputs)
        lengths = [s.completion.n_tokens for s in samples]
        out = {"adv": [adv[i, :n] for i, n in enumerate(lengths)]}
        out["targets"] = (
            [targets[i, :n] for i, n in enumerate(lengths)]
            if targets is not None
            else [None] * len(samples)
        )
        out["ref"] = ref_logp or [None] * len(samples)
        out["old_values"] = old_values or [None] * len(samples)
        return out

    def _advantage_inputs(self, samples, ref_logp, old_values) -> algorithms.AdvantageInputs:
        c = self.c
        t = max([1] + [s.completion.n_tokens for s in samples])
        mask = torch.zeros(len(samples), t)
        token_rewards = torch.zeros(len(samples), t)
        values = torch.zeros(len(samples), t) if old_values else None
        for i, s in enumerate(samples):
            n = s.completion.n_tokens
            if n == 0 or not self.loss_included(s):
                continue
            mask[i, :n] = 1
            credit = s.reward.token_credit
            if credit is not None and len(credit) == n:
                token_rewards[i, :n] = torch.tensor(credit)
            else:
                token_rewards[i, n - 1] = s.score
            if ref_logp and c.rl.kl_in == "reward":
                token_rewards[i, :n] -= c.rl.kl_coef * self.kl(s.completion.logprobs, ref_logp[i])
            if values is not None:
                values[i, :n] = old_values[i]
        stats = None
        if c.rl.algorithm == "reinforce_pp":
            from execrl.rl.advantages import return_to_go

            returns = return_to_go(token_rewards, mask)
            moments = dist.all_reduce_sum(
                torch.stack([(returns * mask).sum(), (returns**2 * mask).sum(), mask.sum()])
            )
            n = moments[2].clamp(min=1)
            mean = moments[0] / n
            stats = (mean, (moments[1] / n - mean**2).clamp(min=0).sqrt())
        return algorithms.AdvantageInputs(
            scores=torch.tensor([s.score if s.valid else 0.0 for s in samples]),
            valid=torch.tensor([s.valid for s in samples]),
            token_rewards=token_rewards, mask=mask, values=values,
            group_size=c.rl.group_size, returns_stats=stats,
        )  # fmt: skip

    def _batch(self, samples: list[Scored]):
        return collate([s.completion.prompt_ids for s in samples],
                       [s.completion.token_ids for s in samples], self.pad_id).to(self.device)  # fmt: skip

    def _micro_step(
        self, samples: list[Scored], prep: dict[str, list], denominator: float
    ) -> torch.Tensor:
        c, dev = self.c, self.device
        batch = self._batch(samples)
        stats = token_stats(self.model, batch, c.sampling.temperature, entropy=True,
                            entropy_grad=bool(c.rl.entropy_coef),
                            hidden=self.value_head is not None)  # fmt: skip
        shape = stats.logp.shape  # (B, T)
        mask = (
            batch.token_mask
            * torch.tensor([float(self.loss_included(s)) for s in samples], device=dev)[:, None]
        )
        old, adv = (
            _pad([s.completion.logprobs for s in samples], shape, dev),
            _pad(prep["adv"], shape, dev),
        )
        loss_tok, clipped = clipped_surrogate(stats.logp, old, adv, c.rl.clip_low, c.rl.clip_high)
        kl_tok = torch.zeros_like(loss_tok)
        if self.kl is not None:
            kl_tok = self.kl(stats.logp, _pad(prep["ref"], shape, dev))
            if c.rl.kl_in == "loss":
                loss_tok = loss_tok + c.rl.kl_coef * kl_tok
        if c.rl.entropy_coef:
            loss_tok = loss_tok - c.rl.entropy_coef * stats.entropy
        loss = self.aggregate(loss_tok, mask, denominator)
        if self.value_head is not None:
            values = self.value_head(stats.hidden.float()).squeeze(-1)
            v_loss = clipped_value_loss(values, _pad(prep["old_values"], shape, dev),
                                        _pad(prep["targets"], shape, dev), c.rl.value_clip)  # fmt: skip
            loss = loss + c.rl.vf_coef * self.aggregate(v_loss, mask, denominator)
        loss.backward()
        m = mask.bool()
        return torch.tensor([loss.item(), clipped[m].sum().item(), kl_tok.detach()[m].sum().item(),
                             stats.entropy.detach()[m].sum().item(), m.sum().item()])  # fmt: skip


def _pad(rows: list[torch.Tensor | None], shape: torch.Size, device) -> torch.Tensor:
    out = torch.zeros(shape)
    for i, r in enumerate(rows):
        if r is not None:
            out[i, : len(r)] = r
    return out.to(device)


def collect(
    sampler: PromptSampler, rollouts: Rollouts, config: TrainConfig, step: int
) -> Collected:
    """Draw, generate and score groups until the step's batch is full (bounded refills)."""
    rl = config.rl
    rank, world = dist.rank(), dist.world_size()
    kept_local: list[list[Scored]] = []
    kept: list[dict[str, Any]] = []
    every: list[dict[str, Any]] = []
    times = RolloutTimes()
    used: list[int] = []
    drawn = rounds = 0
    while len(kept) < rl.groups_per_step and rounds < rl.max_sample_rounds:
        want = rl.groups_per_step - len(kept)
        tasks = sampler.draw(want, exclude=used)
        if not tasks:
            break
        used += tasks
        chunks = rollouts.chunks(tasks)
        mine = gather_chunks(len(chunks), rank, world)
        local = rollouts.run([(i, chunks[i]) for i in mine], rl.group_size, step, rounds, times)
        shared = dist.all_gather_objects({i: to_summary(g) for i, g in local.items()})
        merged = {i: s for part in shared for i, s in part.items()}
        for chunk_id in range(len(chunks)):
            for g, summary in enumerate(merged[chunk_id]):
                valid = [p for p, v in zip(summary["passed"], summary["valid"], strict=True) if v]
                if valid:
                    sampler.update(summary["task"], sum(valid) / len(valid))
                every.append(summary)
                if len(kept) < rl.groups_per_step and (
                    not rl.dynamic_sampling or informative(summary["scores"], summary["valid"])
                ):
                    kept.append(summary)
                    if chunk_id in local:
                        kept_local.append(local[chunk_id][g])
        drawn += len(tasks)
        rounds += 1
        if not rl.dynamic_sampling:
            break
    return Collected(kept_local, kept, drawn, rounds, times, every)
