"""From scored groups to the update's batches: one step, with the model's part injected.

`BatchBuilder.build(groups)` turns the kept groups of a step (`rl.rollout.scored.Scored`,
prompt-major) into `Built`: micro-batches (`losses.Batch`) of (B, T) tensors that stay fixed while
the policy changes (old and reference log-probs, old values, advantages, value targets, the loss
mask). Rows come from three sources, each chosen once at set-up:

- the samples' own sequences: their advantages from the algorithm's record
  (`rl.objective.algorithms`; batch-wide sums such as REINFORCE++'s taken over every process),
  shaped by the episode credit of [credit] (`rl.update.episode_credit`);
- an episode's other segments, a harness's rewritten history (`batch_rows.segment_rows`, when
  `TrainConfig.segment_training` is "every");
- correction samples (`batch_rows.correction_rows`, when credit.correction_coef > 0).

What needs the model (the trainer's and the reference's log-probs, the critic's values) comes
from `batch_rows.ModelTerms`, given at set-up, so the builder runs, and is tested, without a
model. Which samples count is `groups.counts_in_loss`, written once; the update that consumes
the batches is `rl.update.trainer.Learner`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

import torch

from execrl.rl.objective import algorithms, credit, kl
from execrl.rl.objective.logprobs import SequenceBatch
from execrl.rl.objective.losses import Batch
from execrl.rl.parallel import dist
from execrl.rl.rollout.groups import GroupSummary, counts_in_loss
from execrl.rl.rollout.scored import Scored
from execrl.rl.update.batch_rows import (
    Estimated,
    ModelTerms,
    RowMaker,
    RowSource,
    correction_rows,
    no_rows,
    segment_rows,
)
from execrl.rl.update.episode_credit import episode_credit
from execrl.rl.update.learner_settings import LearnerSettings


@dataclass(frozen=True, slots=True)
class Built:
    """A step's micro-batches, by the source of their rows."""

    own: list[Batch]  # the samples' own sequences
    segments: list[Batch]  # an episode's other segments (a rewritten history)
    corrections: list[Batch]  # correction samples (credit.correction_coef)

    @property
    def batches(self) -> list[Batch]:
        """Every micro-batch, in the order the update accumulates them."""
        return [*self.own, *self.segments, *self.corrections]

    @property
    def segment_rows(self) -> int:
        return _rows(self.segments)

    @property
    def correction_rows(self) -> int:
        return _rows(self.corrections)


NOTHING = Built([], [], [])  # a step with nothing to learn from


@dataclass(frozen=True, slots=True)
class _OwnTerms:
    """One micro-batch of the samples' own rows, collated, with per row (T_i,) what the model
    gives; None where it gives nothing."""

    sequences: SequenceBatch
    trainer_logp: list[torch.Tensor] | None  # pi_old recomputed (the engine's is mu)
    ref_logp: list[torch.Tensor] | None
    old_values: list[torch.Tensor] | None


class BatchBuilder:
    """The pure step from scored groups to `Built`; `terms` is the model's part."""

    def __init__(self, settings: LearnerSettings, terms: ModelTerms, pad_id: int,
                 device: torch.device) -> None:  # fmt: skip
        self.settings = settings
        self.rows = RowMaker(terms, pad_id, device, settings.micro_batch_size)
        self.credit = episode_credit(settings.credit)
        self.kl = None if settings.kl_estimator is None else kl.ESTIMATORS[settings.kl_estimator]
        self.per_token = algorithms.counts_tokens(settings.loss_agg)
        self.segments: RowSource = no_rows
        if settings.segment_training == "every":
            self.segments = partial(segment_rows, settings.recompute_old, settings.old_from_update)
        self.corrections: RowSource = no_rows
        if settings.credit.correction_coef > 0:
            self.corrections = partial(correction_rows, settings.credit.correction_coef,
                                       settings.old_from_update)  # fmt: skip

    def counts(self, s: Scored) -> bool:
        return counts_in_loss(
            s.valid, s.completion.truncated, s.policy_tokens, self.settings.overlong_filter
        )

    def denominator(self, kept: list[GroupSummary]) -> float:
        """The global batch's count of what the aggregator averages over (tokens or sequences)."""
        return float(
            sum(g.loss_weight(self.per_token, self.settings.overlong_filter) for g in kept)
        )

    @torch.no_grad()
    def build(self, groups: list[list[Scored]]) -> Built:
        """The micro-batches of the update: every tensor that stays fixed while the policy
        changes."""
        samples = [s for g in groups for s in g]
        # without a reference or a critic the estimator reads nothing of the model, and the
        # model's terms wait for the rows that train
        skips = self.settings.skips_idle_rows
        parts = self.rows.parts(samples)
        terms = [] if skips else [self._own_terms(part) for part in parts]
        inputs = self.advantage_inputs(
            samples, [x for t in terms for x in t.ref_logp or []],
            [x for t in terms for x in t.old_values or []],
        )  # fmt: skip
        inputs = replace(inputs, valid=self.credit.in_baseline(inputs.valid, samples))
        adv, targets = self._estimate_episodes(inputs, samples)
        adv = self.credit.credited(adv, samples)
        estimated = Estimated(groups, samples, adv, inputs.mask)
        if skips:  # `LearnerSettings.skips_idle_rows`: the same gradient without them
            busy = ((adv * inputs.mask) != 0).any(dim=1).nonzero().flatten()  # (B',)
            samples, adv = [samples[i] for i in busy.tolist()], adv[busy]
            targets = None if targets is None else targets[busy]
            parts = self.rows.parts(samples)
            terms = [self._own_terms(part) for part in parts]
        own, lo = [], 0
        for part, part_terms in zip(parts, terms, strict=True):
            rows = slice(lo, lo + len(part))
            own.append(self._own_batch(part, part_terms, adv[rows],
                                       None if targets is None else targets[rows]))  # fmt: skip
            lo += len(part)
        return Built(own, self.segments(self.rows, estimated),
                     self.corrections(self.rows, estimated))  # fmt: skip

    def _estimate(self, x: algorithms.AdvantageInputs) -> algorithms.Advantages:
        """The algorithm's advantages and value targets (B, T) over x; its batch-wide sums (e.g.
        REINFORCE++'s global normalisation) first summed over every process's rows."""
        algorithm = self.settings.algorithm
        if algorithm.batch_sums is not None:
            x = replace(x, batch_sums=dist.all_reduce_sum(algorithm.batch_sums(x)))
        out = algorithm.advantage(x)
        algorithms.check_advantages(self.settings.algorithm_spec, out, x.mask)
        return out

    def _estimate_episodes(self, x: algorithms.AdvantageInputs,
                           samples: list[Scored]) -> algorithms.Advantages:  # fmt: skip
        """The estimator runs over the policy's tokens, the environment's skipped (for a one-turn
        episode, whose tokens are all the policy's, `credit.compact` and `expand` are the
        identity on them); with roles (`LearnerSettings.roles`) once per role, over that role's
        turns alone, so each role's turns are compared with the same role's in the group. The
        roles' tokens are disjoint: their advantages and value targets (B, T) add up."""
        views = [x] if not self.settings.roles else [
            role_view(x, samples, role, self.settings.roles) for role in self.settings.roles
        ]  # fmt: skip
        adv, targets = torch.zeros_like(x.mask), None  # (B, T)
        for view in views:
            part, part_targets = self._estimate(_compacted(view))
            adv = adv + credit.expand(part, view.mask)
            if part_targets is not None:
                targets = credit.expand(part_targets, view.mask) + (
                    0 if targets is None else targets
                )
        return adv, targets

    def _own_terms(self, part: list[Scored]) -> _OwnTerms:
        """One micro-batch of the samples' own sequences and what the model gives on them."""
        terms = self.rows.terms
        batch = self.rows.sequences([s.completion.prompt_ids for s in part],
                                    [s.completion.token_ids for s in part])  # fmt: skip
        lengths = [s.completion.n_tokens for s in part]

        def rows(values: torch.Tensor | None) -> list[torch.Tensor] | None:
            return None if values is None else [values[i, :n].cpu() for i, n in enumerate(lengths)]

        # pi_old differs from the behaviour policy; the update's own forward gives it when the
        # weights stay those of the rollouts for the whole step (`old_from_update`)
        recompute = self.settings.recompute_old and not self.settings.old_from_update
        return _OwnTerms(
            batch,
            trainer_logp=rows(terms.policy_logp(batch) if recompute else None),
            ref_logp=rows(self.rows.reference_logp(batch)),
            old_values=rows(None if terms.values is None else terms.values(batch)),
        )

    def advantage_inputs(self, samples: list[Scored], ref_logp: list[torch.Tensor],
                         old_values: list[torch.Tensor]) -> algorithms.AdvantageInputs:  # fmt: skip
        """What the estimator reads: per-token rewards (minus the KL with rl.kl_in = "reward")
        and old values over the policy's tokens of the samples that count; ref_logp and
        old_values per sample (T_i,), or empty."""
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
            token_rewards[i, :n] = token_rewards_of(s)
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

    def _own_batch(self, samples: list[Scored], terms: _OwnTerms, adv: torch.Tensor,
                   targets: torch.Tensor | None) -> Batch:  # fmt: skip
        """The samples' own rows: adv and targets (B, T) over the samples' tokens."""
        sequences = terms.sequences
        shape = sequences.token_mask.shape  # (B, T)
        device = self.rows.device
        counts = torch.tensor([float(self.counts(s)) for s in samples], device=device)
        lengths = [s.completion.n_tokens for s in samples]

        def pad(rows: list[torch.Tensor] | None) -> torch.Tensor | None:
            return None if rows is None else self.rows.pad(rows, shape)

        behaviour = pad([s.completion.logprobs for s in samples])
        engine = behaviour if self.settings.recompute_old else None
        # pi_old: recomputed; else the update's own forward (None) where it is not mu
        old = pad(terms.trainer_logp) if terms.trainer_logp is not None else None
        return Batch(
            sequences=sequences,
            old_logp=behaviour if engine is None else old,
            engine_logp=engine,
            advantages=pad([adv[i, :n] for i, n in enumerate(lengths)]),
            # the policy's tokens of the samples that count (an episode's environment's are 0)
            mask=sequences.token_mask * counts[:, None] * pad([s.policy_mask() for s in samples]),
            ref_logp=pad(terms.ref_logp),
            old_values=pad(terms.old_values),
            value_targets=pad(
                None if targets is None else [targets[i, :n] for i, n in enumerate(lengths)]
            ),
            tasks=torch.tensor([s.task_index for s in samples]),
            kl_coef_tokens=pad(self.credit.held_kl(samples)),
        )


def token_rewards_of(s: Scored) -> torch.Tensor:
    """(T_i,) the reward on each token: the scorer's token credit when it gave one (a one-turn
    episode's, `reward.token_credit`), else each turn's reward (discounted to the episode's
    start) on that turn's last token (for one turn, a sparse outcome reward on the last)."""
    n = s.completion.n_tokens
    token_credit = s.reward.token_credit
    if token_credit is None:
        turns = s.turns
        return credit.turn_token_rewards(n, turns.ends, turns.rewards, turns.discount)
    if len(token_credit) != n:
        raise ValueError(
            f"task {s.sample.task.id}: token credit has {len(token_credit)} values for a "
            f"completion of {n} tokens; the scorer's offsets must come from the same tokens"
        )
    return torch.tensor(token_credit, dtype=torch.float32)


def role_view(x: algorithms.AdvantageInputs, samples: list[Scored], role: str,
              roles: tuple[str, ...]) -> algorithms.AdvantageInputs:  # fmt: skip
    """The estimator's inputs restricted to `role`'s turns: each episode's score is the part of
    its return those turns earned (`credit.role_return`), and its per-token rewards (turn
    rewards, a KL in the reward), mask and values are kept on those turns' tokens only."""
    tokens = torch.zeros_like(x.mask)  # (B, T)
    scores = torch.zeros_like(x.scores)  # (B,)
    for i, s in enumerate(samples):
        turns = s.turns
        unknown = set(turns.roles) - set(roles) if turns.roles else {""}
        if unknown:
            raise ValueError(f"task {s.sample.task.id}: an episode's turns play roles "
                             f"{sorted(unknown)}; its environment registers {list(roles)} "
                             "(EnvKind.roles, StepInfo.role)")  # fmt: skip
        mine = [k for k, r in enumerate(turns.roles) if r == role]
        tokens[i, : s.completion.n_tokens] = credit.turn_tokens(s.completion.n_tokens,
                                                                turns.ends, mine)  # fmt: skip
        if x.valid[i]:
            scores[i] = credit.role_return(turns.rewards, mine, turns.discount)
    return replace(x, scores=scores, token_rewards=x.token_rewards * tokens, mask=x.mask * tokens)


def _compacted(x: algorithms.AdvantageInputs) -> algorithms.AdvantageInputs:
    """The inputs with each row's policy tokens packed to the front (`credit.compact`)."""
    return replace(
        x,
        token_rewards=credit.compact(x.token_rewards, x.mask),
        values=None if x.values is None else credit.compact(x.values, x.mask),
        mask=credit.compact(x.mask, x.mask),
    )


def _rows(batches: list[Batch]) -> int:
    return sum(len(b.sequences.input_ids) for b in batches)
