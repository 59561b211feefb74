"""Supervised fine-tuning on (prompt, completion) pairs: the one SFT loop (`train_steps`) that
`execrl sft` runs and the embedded default's build runs (`sft`, `models.loading.default`).

The loss is the mean cross-entropy of the completion tokens (prompt tokens are context only).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch


@dataclass(frozen=True, slots=True)
class SFTSettings:
    steps: int = 150
    batch_size: int = 16
    lr: float = 3e-3
    warmup: int = 20
    weight_decay: float = 0.01
    seed: int = 0


def sft_example(tokenizer, prompt: str, completion: str) -> tuple[list[int], int]:
    """(token ids of prompt + completion + eos, number of prompt tokens)."""
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    completion_ids = tokenizer(completion, add_special_tokens=False)["input_ids"]
    return prompt_ids + completion_ids + [tokenizer.eos_token_id], len(prompt_ids)


def collate_sft(examples: Sequence[tuple[list[int], int]], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded batch: input_ids, attention_mask (B, L) and labels (B, L), -100 off-target."""
    width = max(len(ids) for ids, _ in examples)
    input_ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    labels = torch.full((len(examples), width), -100, dtype=torch.long)
    attention = torch.zeros((len(examples), width), dtype=torch.long)
    for row, (ids, n_prompt) in enumerate(examples):
        input_ids[row, : len(ids)] = torch.tensor(ids)
        labels[row, n_prompt : len(ids)] = torch.tensor(ids[n_prompt:])
        attention[row, : len(ids)] = 1
    return {"input_ids": input_ids, "attention_mask": attention, "labels": labels}


def train_steps(
    model,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    batch_for_step: Callable[[int], dict[str, torch.Tensor]],
    steps: range,
    grad_clip: float,
    on_step: Callable[[int, float, dict[str, torch.Tensor]], None] | None = None,
    micro_batch_size: int = 0,
) -> list[float]:
    """The SFT loop: for each step, its batch (`collate_sft`'s fields), the mean cross-entropy
    of the completion tokens (labels != -100), one optimizer and one schedule step; then
    `on_step(step, loss, batch)` (logs, checkpoints). Returns each step's loss. What differs
    between callers is given: how a step's batch is drawn, the optimizer, the schedule.
    `micro_batch_size` > 0: the batch's rows go forward and backward that many at a time, the
    gradients accumulated to the whole batch's (each piece's mean weighted by its share of the
    batch's target tokens): the same step in less memory."""
    params = [p for p in model.parameters() if p.requires_grad]
    model.train()
    losses = []
    for step in steps:
        batch = batch_for_step(step)  # input_ids, attention_mask, labels: (B, L)
        optimizer.zero_grad(set_to_none=True)
        loss = _accumulated_loss(model, batch, micro_batch_size)
        if grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(params, grad_clip)
        optimizer.step()
        scheduler.step()
        losses.append(loss)
        if on_step is not None:
            on_step(step, losses[-1], batch)
    model.eval()
    return losses


def _accumulated_loss(model, batch: dict[str, torch.Tensor], micro_batch_size: int) -> float:
    """Backward of the batch's mean completion-token loss, in pieces of `micro_batch_size` rows
    (0: one piece); the loss's value."""
    rows = batch["input_ids"].shape[0]
    size = micro_batch_size if 0 < micro_batch_size < rows else rows
    # the tokens a causal LM's loss counts: each label after the first position, not -100
    targets = (batch["labels"][:, 1:] != -100).sum(dim=1)  # (B,)
    total = max(int(targets.sum()), 1)
    value = 0.0
    for start in range(0, rows, size):
        piece = {k: v[start : start + size] for k, v in batch.items()}
        share = int(targets[start : start + size].sum()) / total
        if share == 0:
            continue  # no target token in these rows: nothing to learn, no NaN mean
        loss = model(**piece).loss * share  # () this piece's part of the batch's mean
        loss.backward()
        value += loss.item()
    return value


def sft(
    model, tokenizer, pairs: Sequence[tuple[str, str]], settings: SFTSettings, progress=None
) -> list[float]:
    """The embedded default's SFT stage: `train_steps` on the pairs with its recipe's optimizer
    (AdamW, default betas), schedule (warm-up, then linear decay to 5 %), gradient clip 1.0,
    and batches drawn in turn from one generator seeded once (`execrl sft` seeds one per step,
    for resume; the default never resumes, and its weights depend on this order). Trains
    `model` in place; returns the loss of every step."""
    if not pairs:
        raise ValueError("SFT needs at least one (prompt, completion) pair")
    examples = [sft_example(tokenizer, p, c) for p, c in pairs]
    rng = random.Random(settings.seed)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=settings.lr, weight_decay=settings.weight_decay
    )
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda s: min(1.0, (s + 1) / max(1, settings.warmup)) * max(0.05, 1 - s / settings.steps),
    )

    def batch_for_step(step: int) -> dict[str, torch.Tensor]:
        chosen = rng.sample(examples, min(settings.batch_size, len(examples)))
        return collate_sft(chosen, tokenizer.pad_token_id)

    def on_step(step: int, loss: float, batch: dict[str, torch.Tensor]) -> None:
        if progress is not None:
            progress(step, loss)

    return train_steps(
        model, optimizer, schedule, batch_for_step, range(settings.steps), 1.0, on_step
    )
