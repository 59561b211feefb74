"""Supervised fine-tuning on (prompt, completion) pairs: how the embedded default learns to code.

The loss is the mean cross-entropy of the completion tokens (prompt tokens are context only).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
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


def sft(
    model, tokenizer, pairs: Sequence[tuple[str, str]], settings: SFTSettings, progress=None
) -> list[float]:
    """Train `model` in place on the pairs; returns the loss of every step."""
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
    model.train()
    history = []
    for step in range(settings.steps):
        batch = collate_sft(
            rng.sample(examples, min(settings.batch_size, len(examples))), tokenizer.pad_token_id
        )
        out = model(**batch)
        optimizer.zero_grad(set_to_none=True)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        history.append(out.loss.item())
        if progress is not None:
            progress(step, out.loss.item())
    model.eval()
    return history
