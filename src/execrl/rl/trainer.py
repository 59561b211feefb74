"""The policy update of `execrl train`: advantages, then `epochs` passes of the policy loss.

Two stages of the step (`rl.run.train_step`), each a call with a typed record in and out:
`Learner.advantages(groups)` turns the kept groups into `Batch`es of (B, T) tensors fixed during
the update (old, reference log-probs, old values, advantages, value targets, the loss mask), and
`Learner.update(batches)` runs the micro-batches of `losses.policy_loss`, normalised by the
global batch's counts, so accumulation and several processes give the same gradient as one big
batch. Which samples count is `groups.counts_in_loss`, written once. The Learner is given a
`LearnerSettings` record (`rl.learner_settings`), never the whole run config.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import TypeVar

import torch

from execrl.rl import algorithms, corrections, credit, dist, kl
from execrl.rl.groups import GroupSummary, counts_in_loss
from execrl.rl.learner_settings import LearnerSettings
from execrl.rl.logprobs import collate, token_stats
from execrl.rl.losses import Batch, policy_loss
from execrl.rl.scored import Scored
from execrl.rl.tis import LogprobGap, logprob_gap


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
    # fraction of tokens whose importance ratio the cap truncated (`rl.tis`)
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
    """The policy update: pure math comes from `rl.advantages`, `rl.losses` and `rl.kl`; what
    it reads of the run's config is `settings`."""

    def __init__(self, settings: LearnerSettings, model, reference, value_head, optimizer,
                 scheduler, pad_id: int,
                 strategy: dist.Strategy | None = None) -> None:  # fmt: skip
        self.settings, self.model, self.reference = settings, model, reference
        # how the processes share the model (`rl.dist`): whole copies, or FSDP's shards
        self.strategy = strategy or dist.Replicated()
        self.value_head, self.optimizer, self.scheduler = value_head, optimizer, scheduler
        self.pad_id = pad_id
        self.algorithm = settings.algorithm  # everything about the estimator is read from it
        self.aggregate = algorithms.aggregator(settings.loss_agg, settings.max_new_tokens)
        self.per_token = algorithms.counts_tokens(settings.loss_agg)
        self.kl = None if settings.kl_estimator is None else kl.ESTIMATORS[settings.kl_estimator]
        # correction samples in the last advantages() (credit.correction_coef)
        self.corrections_made = 0
        # an episode's other segments trained in the last advantages() (a rewritten history)
        self.segments_trained = 0
        self.device = next(model.parameters()).device

    def counts(self, s: Scored) -> bool:
        return counts_in_loss(
            s.valid, s.completion.truncated, s.policy_tokens, self.settings.overlong_filter
        )

    def denominator(self, kept: list[GroupSummary]) -> float:
        """The global batch's count of what the aggregator averages over (tokens or sequences)."""
        return float(
            sum(g.loss_weight(self.per_token, self.settings.overlong_filter) for g in kept)
        )

    # -- advantages ------------------------------------------------------------------------

    @torch.no_grad()
    def advantages(self, groups: list[list[Scored]]) -> list[Batch]:
        """The micro-batches of the update: every tensor that stays fixed while the policy
        changes (old and reference log-probs, old values, advantages, value targets)."""
        samples = [s for g in groups for s in g]
        parts = _micro_batches(samples, self.settings.micro_batch_size)
        ref_logp: list[torch.Tensor] = []  # per sample (T_i,)
        old_values: list[torch.Tensor] = []
        trainer_logp: list[torch.Tensor] = []  # per sample (T_i,), when the engine is not ours
        for part in parts:
            batch = self._sequences(part)
            lengths = [s.completion.n_tokens for s in part]
            if self.settings.recompute_old:
                stats = token_stats(self.model, batch, self.settings.temperature)
                trainer_logp += [stats.logp[i, :n].cpu() for i, n in enumerate(lengths)]
            if self.kl is not None:
                ref = self._reference_logp(batch)
                ref_logp += [ref[i, :n].cpu() for i, n in enumerate(lengths)]
            if self.value_head is not None:
                stats = token_stats(self.model, batch, self.settings.temperature, hidden=True)
                values = self.value_head(stats.hidden.float()).squeeze(-1)  # (B, T)
                old_values += [values[i, :n].cpu() for i, n in enumerate(lengths)]
        inputs = self._advantage_inputs(samples, ref_logp, old_values)
        if self.settings.credit.baseline == "reached":  # the baseline over corrections alone
            turns = [1 if s.turns is None else len(s.turns.ends) for s in samples]
            reached = credit.reached(turns, self.settings.credit.from_turn)
            inputs = replace(inputs, valid=inputs.valid & reached)
        if any(s.turns is not None for s in samples):
            # episodes: the estimators run over the policy's tokens, the environment's skipped
            adv, targets = self._estimate(_compacted(inputs))
            adv = credit.expand(adv, inputs.mask)
            if self.settings.credit.from_turn > 1:  # held turns: no advantage on their tokens
                adv = adv * self._credited(samples, inputs.mask.shape[1])
            targets = None if targets is None else credit.expand(targets, inputs.mask)
        else:
            adv, targets = self._estimate(inputs)
        out, lo = [], 0
        for part in parts:
            rows = range(lo, lo + len(part))
            out.append(self._batch(part, adv[lo : lo + len(part)],
                                   None if targets is None else targets[lo : lo + len(part)],
                                   [ref_logp[i] for i in rows] if ref_logp else None,
                                   [old_values[i] for i in rows] if old_values else None,
                                   [trainer_logp[i] for i in rows] if trainer_logp else None))  # fmt: skip
            lo += len(part)
        self.segments_trained = 0
        if any(s.segments for s in samples):
            out += self._segment_batches(samples, adv, inputs.mask)
        if self.settings.credit.correction_coef > 0:
            out += self._correction_batches(groups)
        return out

    def _estimate(self, x: algorithms.AdvantageInputs) -> algorithms.Advantages:
        """The algorithm's advantages and value targets (B, T) over x; its batch-wide sums (e.g.
        REINFORCE++'s global normalisation) first summed over every process's rows."""
        if self.algorithm.batch_sums is not None:
            x = replace(x, batch_sums=dist.all_reduce_sum(self.algorithm.batch_sums(x)))
        out = self.algorithm.advantage(x)
        algorithms.check_advantages(self.settings.algorithm_spec, out, x.mask)
        return out

    def _segment_batches(self, samples: list[Scored], adv: torch.Tensor,
                         mask: torch.Tensor) -> list[Batch]:  # fmt: skip
        """An episode's other segments (a harness that rewrote its history): each a sequence
        of its own, its policy tokens given the episode's advantage, which an outcome
        estimator makes one number per episode (`TrainConfig.segment_training`): read at the
        episode's last policy token. adv, mask: (B, T) over the episodes' own sequences. Old
        log-probs as for the episodes' own: the engine's, or the trainer's (TIS) beside them."""
        rows = [
            (s.task_index, segment, float(adv[i, int(mask[i].nonzero()[-1])]))
            for i, s in enumerate(samples)
            if s.segments and self.counts(s) and mask[i].any()
            for segment in s.segments
        ]
        self.segments_trained = len(rows)
        out = []
        for part in _micro_batches(rows, self.settings.micro_batch_size):
            batch = collate([seg.prompt_ids for _, seg, _ in part],
                            [seg.token_ids for _, seg, _ in part], self.pad_id).to(self.device)  # fmt: skip
            shape = batch.token_mask.shape  # (B, T)
            policy = _pad([seg.policy_mask for _, seg, _ in part], shape).to(self.device)
            behaviour = _pad([seg.logprobs for _, seg, _ in part], shape).to(self.device)
            trainer_logp = None
            if self.settings.recompute_old:
                trainer_logp = token_stats(self.model, batch, self.settings.temperature).logp
            ref = None if self.kl is None else self._reference_logp(batch)
            seg_mask = batch.token_mask * policy
            advantage = torch.tensor([a for _, _, a in part], device=self.device)[:, None]
            out.append(Batch(
                sequences=batch, mask=seg_mask, advantages=advantage * seg_mask,
                old_logp=behaviour if trainer_logp is None else trainer_logp * seg_mask,
                engine_logp=None if trainer_logp is None else behaviour,
                ref_logp=None if ref is None else ref * seg_mask,
                tasks=torch.tensor([task for task, _, _ in part]),
            ))  # fmt: skip
        return out

    def _correction_batches(self, groups: list[list[Scored]]) -> list[Batch]:
        """The groups' correction samples (`rl.corrections`): the answer's tokens get the fixed
        advantage credit.correction_coef; old log-probs are this policy's own (the answer was not
        sampled in this context), so the first epoch's ratio is 1 and the clip bounds the rest."""
        made = [c for g in groups for c in corrections.correction_samples(g)]
        self.corrections_made = len(made)
        out = []
        for part in _micro_batches(made, self.settings.micro_batch_size):
            batch = collate([c.prompt_ids for c in part], [c.token_ids for c in part],
                            self.pad_id).to(self.device)  # fmt: skip
            mask = _pad([c.mask for c in part], batch.token_mask.shape).to(self.device)
            old = token_stats(self.model, batch, self.settings.temperature).logp
            ref = None if self.kl is None else self._reference_logp(batch)
            out.append(Batch(sequences=batch, old_logp=old * mask,
                             advantages=self.settings.credit.correction_coef * mask, mask=mask,
                             ref_logp=None if ref is None else ref * mask,
                             tasks=torch.tensor([c.task_index for c in part])))  # fmt: skip
        return out

    def _reference_logp(self, batch) -> torch.Tensor:
        """(B, T) the reference model's log-probs (the base under the adapter, with LoRA)."""
        return token_stats(self.reference, batch, self.settings.temperature,
                           disable_adapter=self.reference is self.model).logp  # fmt: skip

    def _credited(self, samples: list[Scored], width: int) -> torch.Tensor:
        """(B, T) 1 where an episode's advantage may land: the tokens of turns >=
        credit.from_turn (all of them at 1, the default)."""
        out = torch.ones(len(samples), width)
        for i, s in enumerate(samples):
            out[i, : s.completion.n_tokens] = self._from_turn(s)
        return out

    def _from_turn(self, s: Scored) -> torch.Tensor:
        """(T_i,) 1 on the tokens of turns >= credit.from_turn, 0 on the held turns'."""
        n, first = s.completion.n_tokens, self.settings.credit.from_turn
        if s.turns is None or first == 1:
            return torch.ones(n)
        return credit.from_turn(n, s.turns.ends, first)

    def _held_kl(self, samples: list[Scored]) -> list[torch.Tensor] | None:
        """Per sample (T_i,): credit.held_kl_coef on the policy's tokens of the held turns."""
        coef = self.settings.credit.held_kl_coef
        if coef == 0:
            return None
        return [coef * s.policy_mask() * (1 - self._from_turn(s)) for s in samples]

    def _advantage_inputs(self, samples, ref_logp, old_values) -> algorithms.AdvantageInputs:
        settings = self.settings
        t = max([1] + [s.completion.n_tokens for s in samples])
        mask = torch.zeros(len(samples), t)  # (B, T)
        token_rewards = torch.zeros(len(samples), t)  # (B, T)
        values = torch.zeros(len(samples), t) if old_values else None
        for i, s in enumerate(samples):
            n = s.completion.n_tokens
            if not self.counts(s):
                continue
            mask[i, :n] = s.policy_mask()  # an episode's environment tokens are 0
            token_rewards[i, :n] = self._token_rewards(s)
            if ref_logp and settings.kl_in_reward:
                kl_term = self.kl(s.completion.logprobs, ref_logp[i]) * mask[i, :n]
                token_rewards[i, :n] -= settings.kl_coef * kl_term
            if values is not None:
                values[i, :n] = old_values[i]
        return algorithms.AdvantageInputs(
            scores=torch.tensor([s.score if s.valid else 0.0 for s in samples]),
            valid=torch.tensor([s.valid for s in samples]),
            token_rewards=token_rewards, mask=mask, values=values,
            group_size=settings.group_size, gamma=settings.gamma, lam=settings.lam,
        )  # fmt: skip

    @staticmethod
    def _token_rewards(s: Scored) -> torch.Tensor:
        """(T_i,) the reward on each token: the scorer's token credit when it gave one, else
        the score on the last token (a sparse outcome reward); for an episode, each turn's
        reward (discounted to the episode's start) on that turn's last token."""
        n = s.completion.n_tokens
        if s.turns is not None:
            turns = s.turns
            return credit.turn_token_rewards(n, turns.ends, turns.rewards, turns.discount)
        token_credit = s.reward.token_credit
        if token_credit is None:
            out = torch.zeros(n)
            out[n - 1] = s.score
            return out
        if len(token_credit) != n:
            raise ValueError(
                f"task {s.sample.task.id}: token credit has {len(token_credit)} values for a "
                f"completion of {n} tokens; the scorer's offsets must come from the same tokens"
            )
        return torch.tensor(token_credit, dtype=torch.float32)

    def _sequences(self, samples: list[Scored]):
        return collate([s.completion.prompt_ids for s in samples],
                       [s.completion.token_ids for s in samples], self.pad_id).to(self.device)  # fmt: skip

    def _batch(self, samples, adv, targets, ref, old_values, trainer_logp=None) -> Batch:
        sequences = self._sequences(samples)
        shape = sequences.token_mask.shape  # (B, T)
        counts = torch.tensor([float(self.counts(s)) for s in samples], device=self.device)
        lengths = [s.completion.n_tokens for s in samples]

        def pad(rows: list[torch.Tensor] | None) -> torch.Tensor | None:
            return None if rows is None else _pad(rows, shape).to(self.device)

        behaviour = pad([s.completion.logprobs for s in samples])
        return Batch(
            sequences=sequences,
            old_logp=behaviour if trainer_logp is None else pad(trainer_logp),
            engine_logp=None if trainer_logp is None else behaviour,
            advantages=pad([adv[i, :n] for i, n in enumerate(lengths)]),
            # the policy's tokens of the samples that count (an episode's environment's are 0)
            mask=sequences.token_mask * counts[:, None] * pad([s.policy_mask() for s in samples]),
            ref_logp=pad(ref),
            old_values=pad(old_values),
            value_targets=pad(
                None if targets is None else [targets[i, :n] for i, n in enumerate(lengths)]
            ),
            tasks=torch.tensor([s.task_index for s in samples]),
            kl_coef_tokens=pad(self._held_kl(samples)),
        )

    # -- update ----------------------------------------------------------------------------

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
            for batch in self.strategy.balanced(batches):
                self._micro_step(batch, denominator, sums, by_task)
            sums = sums.all_reduced()
            grad_norm = self.strategy.reduce_and_clip(params, self.settings.grad_clip)
            if not math.isfinite(grad_norm):
                self.optimizer.zero_grad(set_to_none=True)
                return UpdateMetrics(skipped_update=1.0, grad_norm=float("nan"))
            self.optimizer.step()
        self.scheduler.step()
        n_tok = max(1.0, sums.tokens)
        gap = _engine_gap(batches, self.settings.loss.tis_cap)
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
                    by_task: dict[int, list[float]]) -> None:  # fmt: skip
        stats = token_stats(self.model, batch.sequences, self.settings.temperature, entropy=True,
                            entropy_grad=bool(self.settings.loss.entropy_coef),
                            hidden=self.value_head is not None)  # fmt: skip
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


def _all_tasks(by_task: dict[int, list[float]]) -> dict[int, tuple[float, float]]:
    """This process's per-task (KL sum, tokens) merged with every other process's."""
    out: dict[int, tuple[float, float]] = {}
    for part in dist.all_gather_objects(by_task):
        for task, (kl_sum, n) in part.items():
            before = out.get(task, (0.0, 0.0))
            out[task] = (before[0] + kl_sum, before[1] + n)
    return out


def _compacted(x: algorithms.AdvantageInputs) -> algorithms.AdvantageInputs:
    """The inputs with each row's policy tokens packed to the front (`credit.compact`)."""
    return replace(
        x,
        token_rewards=credit.compact(x.token_rewards, x.mask),
        values=None if x.values is None else credit.compact(x.values, x.mask),
        mask=credit.compact(x.mask, x.mask),
    )


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


def _pad(rows: list[torch.Tensor], shape: torch.Size) -> torch.Tensor:
    """(B, T) the rows (T_i,) right-padded with 0."""
    out = torch.zeros(shape)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out


_Item = TypeVar("_Item")


def _micro_batches(items: list[_Item], size: int) -> list[list[_Item]]:
    """`items` in consecutive runs of `size` (the last may be shorter)."""
    return [items[lo : lo + size] for lo in range(0, len(items), size)]
