"""The run of `execrl sft`: supervised fine-tuning, the warm-up stage before RL.

    execrl sft --set data.train=pairs.jsonl --set model.path=default
    execrl train --set model.path=runs/<name>/final

The run directory (run.out_dir/run.name) holds config.toml (the resolved config), metrics.jsonl
(loss, learning rate, tokens per step), checkpoint/ (for --resume: the trainable weights, the
optimizer and the schedule at a step), final/ (the model and its tokenizer in Hugging Face
format, LoRA merged in: a valid `model.path` for `execrl train`) and summary.json. The model,
the optimizer and its schedule are set up as `execrl train` sets up its own (`rl.setup`); the
loop is the one the embedded default's build runs too (`models.loading.sft.train_steps`). Each step
draws its batch from a generator seeded by (run.seed, step), so a resumed run takes the same
batches as one that was never stopped.
"""

from __future__ import annotations

import dataclasses
import json
import random
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

import torch

from execrl.models.loading import sft as sft_loop
from execrl.models.threads import Machine, choose_threads, threads_used, with_threads
from execrl.rl.checkpoint import Unwritable
from execrl.rl.setup import optimizer_and_schedule, policy_of
from execrl.rl.sft.checkpoint import load_checkpoint, save_checkpoint, save_final
from execrl.rl.sft.config import SFTConfig, to_toml
from execrl.rl.sft.data import Examples, read_pairs, tokenize


@dataclass(frozen=True, slots=True)
class SFTSummary:
    """What a run did: printed as JSON by `execrl sft` and kept as summary.json."""

    run_dir: str
    final: str  # the model directory, a model.path for `execrl train`
    steps: int
    first_step: int  # 0, or the step a resumed run went on from
    loss_first: float | None  # of the first step this process ran (None: it ran none)
    loss_last: float | None
    examples: int
    too_long: int  # examples over data.max_tokens, left out


class StepTracker(Protocol):
    def log(self, row: Mapping[str, Any], step: int) -> None: ...

    def close(self) -> None: ...


# (run directory, the resolved config, first step) -> where each step's metrics row goes
# besides metrics.jsonl. The report layer's trackers, handed in by the command: rl cannot
# import report.
TrackerFactory = Callable[[Path, Mapping[str, Any], int], Sequence[StepTracker]]


def run_sft(
    config: SFTConfig, resume: Path | None = None, trackers: TrackerFactory | None = None
) -> SFTSummary:
    """Train as `config` says (continuing the run directory `resume` if given)."""
    threads = choose_threads(config.model.threads, 0, Machine.now(), "model.threads")
    print(f"execrl sft: {threads.line()}", file=sys.stderr)
    with threads_used(threads):
        return _run_sft(with_threads(config, threads), resume, trackers or (lambda *_: ()))


@dataclass
class _Run:
    """What a run trains, set up once before its first step."""

    config: SFTConfig
    run_dir: Path
    device: str
    policy: Any  # models.Policy
    examples: Examples
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler


def _set_up(config: SFTConfig, resume: Path | None) -> _Run:
    m = config.model
    device = m.device if m.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    policy = policy_of(config, device)
    examples = tokenize(read_pairs(Path(config.data.train), policy.tokenizer),
                        policy.tokenizer, config.data.max_tokens)  # fmt: skip
    run_dir = resume or Path(config.run.out_dir) / (
        config.run.name or time.strftime("%Y%m%d-%H%M%S")
    )
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.toml").write_text(to_toml(config))
    params = [p for p in policy.model.parameters() if p.requires_grad]
    optimizer, scheduler = optimizer_and_schedule(params, config.optim, config.run.steps)
    return _Run(config, run_dir, device, policy, examples, optimizer, scheduler)


def _run_sft(config: SFTConfig, resume: Path | None, open_trackers: TrackerFactory) -> SFTSummary:
    run = _set_up(config, resume)
    model = run.policy.model
    start = load_checkpoint(run.run_dir, model, run.optimizer, run.scheduler) if resume else 0
    trackers = open_trackers(run.run_dir, dataclasses.asdict(config), start)
    pad, examples = run.policy.tokenizer.pad_token_id, run.examples.tokens

    def batch_for_step(step: int) -> dict[str, torch.Tensor]:
        # Seeded by (run.seed, step): a resumed run draws the batches an unstopped one would.
        rng = random.Random(config.run.seed * 1_000_003 + step)
        chosen = rng.sample(examples, min(config.run.batch_size, len(examples)))
        return {k: v.to(run.device) for k, v in sft_loop.collate_sft(chosen, pad).items()}

    with open(run.run_dir / "metrics.jsonl", "a" if resume else "w", encoding="utf-8") as log:
        losses = sft_loop.train_steps(
            model, run.optimizer, run.scheduler, batch_for_step, range(start, config.run.steps),
            config.optim.grad_clip, _StepLog(run, log, trackers),
            micro_batch_size=config.run.micro_batch_size,
        )  # fmt: skip
    for tracker in trackers:
        tracker.close()
    return _finish(run, start, losses)


class _StepLog:
    """After each step: its metrics row (metrics.jsonl, the trackers), a progress line, and a
    checkpoint every run.checkpoint_every steps (the last one is `_finish`'s)."""

    def __init__(self, run: _Run, log: IO[str], trackers: Sequence[StepTracker]) -> None:
        self.run, self.log, self.trackers = run, log, trackers
        self.clock = time.perf_counter()

    def __call__(self, step: int, loss: float, batch: dict[str, torch.Tensor]) -> None:
        now, run = time.perf_counter(), self.run
        row = {
            "step": step,
            "loss": loss,
            "lr": run.scheduler.get_last_lr()[0],
            "completion_tokens": int((batch["labels"] != -100).sum()),
            "seconds": now - self.clock,
        }
        self.clock = now
        self.log.write(json.dumps(row) + "\n")
        self.log.flush()
        for tracker in self.trackers:
            tracker.log(row, step)
        steps = run.config.run.steps
        _progress(step, steps, loss)
        every = run.config.run.checkpoint_every
        if every and (step + 1) % every == 0 and step + 1 < steps:
            save_checkpoint(run.run_dir, step + 1, run.policy.model, run.optimizer, run.scheduler)


def _finish(run: _Run, start: int, losses: list[float]) -> SFTSummary:
    """The last checkpoint, final/ and summary.json; a checkpoint the disk had no room for is
    raised after final/ is written (smaller, and what a user wants most)."""
    steps = run.config.run.steps
    unsaved = None
    try:
        save_checkpoint(run.run_dir, steps, run.policy.model, run.optimizer, run.scheduler)
    except Unwritable as error:
        unsaved = error
    final = save_final(run.run_dir, run.policy, run.config.model.path)
    summary = SFTSummary(
        run_dir=str(run.run_dir),
        final=str(final),
        steps=steps,
        first_step=start,
        loss_first=losses[0] if losses else None,
        loss_last=losses[-1] if losses else None,
        examples=len(run.examples.tokens),
        too_long=run.examples.too_long,
    )
    (run.run_dir / "summary.json").write_text(json.dumps(dataclasses.asdict(summary), indent=2))
    if unsaved is not None:
        raise unsaved
    return summary


def _progress(step: int, total: int, loss: float) -> None:
    """A line per tenth of the run, on stderr when it is a terminal (quiet otherwise)."""
    if sys.stderr.isatty() and (step % max(1, total // 10) == 0 or step == total - 1):
        print(f"  sft step {step + 1}/{total} loss {loss:.4f}", file=sys.stderr)
