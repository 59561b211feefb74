"""How rows become the update's tensors, and the two sources of rows besides the samples' own:
an episode's other segments (a harness's rewritten history) and correction samples (CIPO).

`ModelTerms` is the model's part of a batch (the trainer's and the reference's log-probs, the
critic's values), injected at set-up so that everything here runs without a model; `RowMaker`
collates rows, pads them and moves them to the update's device. The batch builder
(`rl.update.batch_builder`) picks each source once at set-up, or `no_rows` in its place.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import torch

from execrl.rl.objective.logprobs import SequenceBatch, collate, resolve_head, token_stats
from execrl.rl.objective.losses import Batch
from execrl.rl.rollout.scored import Scored
from execrl.rl.update import corrections

LogProbs = Callable[[SequenceBatch], torch.Tensor]  # a collated batch -> (B, T)


@dataclass(frozen=True, slots=True)
class ModelTerms:
    """What a batch needs of the model, each (B, T) over a collated batch."""

    policy_logp: LogProbs  # the trainer's own log pi, at the sampling temperature
    reference_logp: LogProbs | None = None  # the reference model's; None: none is loaded
    values: LogProbs | None = None  # the critic's V(s_t); None: the algorithm has none


def model_terms(model: Any, reference: Any, value_head: Any, temperature: float,
                head: str = "full") -> ModelTerms:  # fmt: skip
    """The terms of the policy `model`, its `reference` (the model itself under LoRA: the base
    under the adapter) and the critic `value_head` (None where absent); `head` is
    rl.logprob_head, resolved here once for each model (`logprobs.resolve_head`)."""
    policy_head = resolve_head(model, head)
    reference_head = policy_head if reference is None else resolve_head(reference, head)

    def policy(batch: SequenceBatch) -> torch.Tensor:
        return token_stats(model, batch, temperature, head=policy_head).logp

    def base(batch: SequenceBatch) -> torch.Tensor:
        return token_stats(reference, batch, temperature, disable_adapter=reference is model,
                           head=reference_head).logp  # fmt: skip

    def values(batch: SequenceBatch) -> torch.Tensor:
        stats = token_stats(model, batch, temperature, hidden=True, head=policy_head)
        return value_head(stats.hidden.float()).squeeze(-1)  # (B, T)

    return ModelTerms(policy, None if reference is None else base,
                      None if value_head is None else values)  # fmt: skip


_Item = TypeVar("_Item")


@dataclass(frozen=True, slots=True)
class RowMaker:
    """Rows to tensors: micro-batches of `micro_batch_size`, on `device`."""

    terms: ModelTerms
    pad_id: int
    device: torch.device
    micro_batch_size: int

    def parts(self, items: list[_Item]) -> list[list[_Item]]:
        """`items` in consecutive runs of micro_batch_size (the last may be shorter)."""
        size = self.micro_batch_size
        return [items[lo : lo + size] for lo in range(0, len(items), size)]

    def sequences(self, prompts: Sequence[torch.Tensor],
                  completions: Sequence[torch.Tensor]) -> SequenceBatch:  # fmt: skip
        return collate(prompts, completions, self.pad_id).to(self.device)

    def pad(self, rows: Sequence[torch.Tensor], shape: torch.Size) -> torch.Tensor:
        """(B, T) on the device: the rows (T_i,) right-padded with 0."""
        out = torch.zeros(shape)
        for i, row in enumerate(rows):
            out[i, : len(row)] = row
        return out.to(self.device)

    def reference_logp(self, batch: SequenceBatch) -> torch.Tensor | None:
        reference = self.terms.reference_logp
        return None if reference is None else reference(batch)


@dataclass(frozen=True, slots=True)
class Estimated:
    """The samples' own rows once their advantages are known: what the other sources read."""

    groups: list[list[Scored]]  # prompt-major
    samples: list[Scored]  # the groups' samples in order: row i of the tensors
    advantages: torch.Tensor  # (B, T)
    mask: torch.Tensor  # (B, T) 1 on the policy's tokens of the samples that count


RowSource = Callable[[RowMaker, Estimated], list[Batch]]  # rows besides the samples' own


def no_rows(rows: RowMaker, own: Estimated) -> list[Batch]:
    return []


def segment_rows(recompute_old: bool, old_from_update: bool, rows: RowMaker,
                 own: Estimated) -> list[Batch]:  # fmt: skip
    """An episode's other segments (a harness that rewrote its history): each a sequence of its
    own, its policy tokens given the episode's advantage, which an outcome estimator makes one
    number per episode (`TrainConfig.segment_training` = "every"): read at the episode's last
    policy token. Old log-probs as for the episodes' own: the engine's, or the trainer's (TIS)
    beside them, or the update's own forward's (`LearnerSettings.old_from_update`)."""
    mask = own.mask
    found = [
        (s.task_index, segment, float(own.advantages[i, int(mask[i].nonzero()[-1])]))
        for i, s in enumerate(own.samples)
        if s.segments and mask[i].any()  # a row that does not count is all 0
        for segment in s.segments
    ]
    out = []
    for part in rows.parts(found):
        batch = rows.sequences([seg.prompt_ids for _, seg, _ in part],
                               [seg.token_ids for _, seg, _ in part])  # fmt: skip
        shape = batch.token_mask.shape  # (B, T)
        policy = rows.pad([seg.policy_mask for _, seg, _ in part], shape)
        behaviour = rows.pad([seg.logprobs for _, seg, _ in part], shape)
        seg_mask = batch.token_mask * policy
        trainer_logp = (
            rows.terms.policy_logp(batch) * seg_mask
            if recompute_old and not old_from_update
            else None
        )
        ref = rows.reference_logp(batch)
        advantage = torch.tensor([a for _, _, a in part], device=rows.device)[:, None]
        out.append(Batch(
            sequences=batch, mask=seg_mask, advantages=advantage * seg_mask,
            old_logp=trainer_logp if recompute_old else behaviour,
            engine_logp=behaviour if recompute_old else None,
            ref_logp=None if ref is None else ref * seg_mask,
            tasks=torch.tensor([task for task, _, _ in part]),
        ))  # fmt: skip
    return out


def correction_rows(coef: float, old_from_update: bool, rows: RowMaker,
                    own: Estimated) -> list[Batch]:  # fmt: skip
    """The groups' correction samples (`rl.update.corrections`): the answer's tokens get the fixed
    advantage `coef` (credit.correction_coef); old log-probs are this policy's own (the answer
    was not sampled in this context), so the first epoch's ratio is 1 and the clip bounds the
    rest. old_from_update: one epoch on the current weights, the update's forward gives them."""
    made = [c for g in own.groups for c in corrections.correction_samples(g)]
    out = []
    for part in rows.parts(made):
        batch = rows.sequences([c.prompt_ids for c in part], [c.token_ids for c in part])
        answer = rows.pad([c.mask for c in part], batch.token_mask.shape)
        old = None if old_from_update else rows.terms.policy_logp(batch) * answer
        ref = rows.reference_logp(batch)
        out.append(Batch(sequences=batch, old_logp=old, advantages=coef * answer,
                         mask=answer, ref_logp=None if ref is None else ref * answer,
                         tasks=torch.tensor([c.task_index for c in part])))  # fmt: skip
    return out
