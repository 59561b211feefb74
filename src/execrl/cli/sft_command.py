"""`execrl sft`: supervised fine-tuning, the warm-up stage before RL.

    execrl sft --set data.train=pairs.jsonl --set model.path=default
    execrl train --set model.path=runs/<name>/final

The run directory (run.out_dir/run.name) holds config.toml (the resolved config), metrics.jsonl
(loss, learning rate, tokens per step), checkpoint/ (for --resume: the trainable weights, the
optimizer and the schedule at a step), final/ (the model and its tokenizer in Hugging Face
format, LoRA merged in: a valid `model.path` for `execrl train`) and summary.json. Errors a
person can fix (config, data) are messages and exit status 2, found before the model loads
where they can be. Each step draws its batch from a generator seeded by (run.seed, step), so a
resumed run takes the same batches as one that was never stopped.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "sft",
        help="supervised fine-tuning on prompt/completion pairs or chat messages",
        description="Fine-tune a model on JSONL examples, loss on the completion tokens only; "
        "its final/ directory is a model.path for `execrl train`. Fields: execrl/cli/sft_config.py.",
    )
    p.add_argument("--config", help="TOML file with [model], [data], [optim], [run] sections")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                   help="override one config field, e.g. --set data.train=pairs.jsonl")  # fmt: skip
    p.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its checkpoint "
                   "(--set may change run.steps, run.checkpoint_every, run.trackers, model.threads)")  # fmt: skip
    p.set_defaults(handler=_sft)


def _sft(args: argparse.Namespace) -> int:
    from execrl.cli.sft_config import load_sft_config, resume_sft_config
    from execrl.models.registry import require_fetched
    from execrl.report.trackers import TrackerUnavailable, tracker_names
    from execrl.rl.checkpoint import Unwritable
    from execrl.rl.config import ConfigError
    from execrl.tasks.errors import TaskDataError

    try:
        if args.resume:
            if args.config:
                raise ConfigError("--resume continues with the run's saved config; drop --config")
            config = resume_sft_config(Path(args.resume), args.set)
        else:
            config = load_sft_config(args.config, args.set)
        if not Path(config.data.train).is_file():
            raise ConfigError(f"data.train: no such file {config.data.train}")
        tracker_names(config.run.trackers)
        require_fetched(config.model.path)  # a known model not fetched: before anything loads
        summary = run_sft(config, Path(args.resume) if args.resume else None)
    except (
        ConfigError,
        TaskDataError,
        TrackerUnavailable,
        ValueError,
        ImportError,
        FileNotFoundError,
        Unwritable,
    ) as e:  # FileNotFoundError: no model there (or offline); Unwritable: a full disk
        print(f"execrl sft: error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(summary))
    return 0


def run_sft(config: Any, resume: Path | None = None) -> dict[str, Any]:
    """Train as `config` says (continuing `resume` if given); the summary that is printed."""
    from execrl.models.threads import Machine, choose_threads, threads_used, with_threads

    threads = choose_threads(config.model.threads, 0, Machine.now(), "model.threads")
    print(f"execrl sft: {threads.line()}", file=sys.stderr)
    with threads_used(threads):
        return _run_sft(with_threads(config, threads), resume)


def _run_sft(config: Any, resume: Path | None) -> dict[str, Any]:
    import torch

    from execrl.cli.sft_config import to_toml
    from execrl.cli.sft_data import read_pairs, tokenize
    from execrl.models.loading import LoraSpec, load_policy
    from execrl.models.sft import collate_sft, train_steps
    from execrl.rl.checkpoint import Unwritable
    from execrl.rl.setup import lr_schedule

    m = config.model
    device = m.device if m.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    lora = LoraSpec(m.lora_r, m.lora_alpha, 0.0, tuple(m.lora_targets)) if m.lora_r else None
    policy = load_policy(m.path, device=device, dtype=m.dtype, lora=lora, pad_token=m.pad_token)
    examples = tokenize(read_pairs(Path(config.data.train), policy.tokenizer),
                        policy.tokenizer, config.data.max_tokens)  # fmt: skip
    run_dir = resume or Path(config.run.out_dir) / (
        config.run.name or time.strftime("%Y%m%d-%H%M%S")
    )
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.toml").write_text(to_toml(config))
    model = policy.model
    params = [p for p in model.parameters() if p.requires_grad]
    o = config.optim
    optimizer = torch.optim.AdamW(params, lr=o.lr, betas=(o.beta1, o.beta2),
                                  weight_decay=o.weight_decay)  # fmt: skip
    # execrl train's schedule (warm-up, then constant, linear or cosine): one home for it
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_schedule(config))
    start = _load_checkpoint(run_dir, model, optimizer, scheduler) if resume else 0
    trackers = _trackers(config, run_dir, start)
    pad = policy.tokenizer.pad_token_id

    def batch_for_step(step: int) -> dict[str, torch.Tensor]:
        # Seeded by (run.seed, step): a resumed run draws the batches an unstopped one would.
        rng = random.Random(config.run.seed * 1_000_003 + step)
        chosen = rng.sample(examples.tokens, min(config.run.batch_size, len(examples.tokens)))
        return {k: v.to(device) for k, v in collate_sft(chosen, pad).items()}

    with open(run_dir / "metrics.jsonl", "a" if resume else "w", encoding="utf-8") as log:
        clock = [time.perf_counter()]

        def on_step(step: int, loss: float, batch: dict[str, torch.Tensor]) -> None:
            now = time.perf_counter()
            row = {
                "step": step,
                "loss": loss,
                "lr": scheduler.get_last_lr()[0],
                "completion_tokens": int((batch["labels"] != -100).sum()),
                "seconds": now - clock[0],
            }
            clock[0] = now
            log.write(json.dumps(row) + "\n")
            log.flush()
            for tracker in trackers:
                tracker.log(row, step)
            _progress(step, config.run.steps, loss)
            every = config.run.checkpoint_every
            if every and (step + 1) % every == 0 and step + 1 < config.run.steps:
                _save_checkpoint(run_dir, step + 1, model, optimizer, scheduler)

        steps = range(start, config.run.steps)
        losses = train_steps(model, optimizer, scheduler, batch_for_step, steps, o.grad_clip,
                             on_step, micro_batch_size=config.run.micro_batch_size)  # fmt: skip
    for tracker in trackers:
        tracker.close()
    unsaved = None
    try:
        _save_checkpoint(run_dir, config.run.steps, model, optimizer, scheduler)
    except Unwritable as error:  # a full disk: final/ is smaller and what a user wants most
        unsaved = error
    final = _save_final(run_dir, policy, config.model.path)
    summary = {
        "run_dir": str(run_dir),
        "final": str(final),
        "steps": config.run.steps,
        "first_step": start,
        "loss_first": losses[0] if losses else None,
        "loss_last": losses[-1] if losses else None,
        "examples": len(examples.tokens),
        "too_long": examples.too_long,
    }
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    if unsaved is not None:
        raise unsaved
    return summary


def _trackers(config: Any, run_dir: Path, first_step: int) -> list[Any]:
    import dataclasses

    from execrl.report.trackers import open_trackers, tracker_names

    names = tracker_names(config.run.trackers)
    return open_trackers(names, run_dir, dataclasses.asdict(config), first_step)


def _progress(step: int, total: int, loss: float) -> None:
    """A line per tenth of the run, on stderr when it is a terminal (quiet otherwise)."""
    if sys.stderr.isatty() and (step % max(1, total // 10) == 0 or step == total - 1):
        print(f"  sft step {step + 1}/{total} loss {loss:.4f}", file=sys.stderr)


def _trainable(model: Any) -> dict[str, Any]:
    return {n: p.detach().cpu() for n, p in model.named_parameters() if p.requires_grad}


def _save_checkpoint(run_dir: Path, step: int, model: Any, optimizer: Any, scheduler: Any) -> None:
    """checkpoint/state.pt, written beside and renamed (`rl.checkpoint.save_atomic`)."""
    from execrl.rl.checkpoint import save_atomic  # imports torch: not for --help

    state = {
        "step": step,
        "trainable": _trainable(model),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
    }
    (run_dir / "checkpoint").mkdir(exist_ok=True)
    save_atomic(state, run_dir / "checkpoint" / "state.pt")


def _load_checkpoint(run_dir: Path, model: Any, optimizer: Any, scheduler: Any) -> int:
    import torch

    from execrl.rl.safe_load import load_weights

    path = run_dir / "checkpoint" / "state.pt"
    if not path.is_file():
        raise ValueError(f"--resume {run_dir}: no checkpoint/state.pt; nothing to continue from")
    state = load_weights(path, map_location="cpu")  # UnsafeFile, a ValueError: exit 2
    current = dict(model.named_parameters())
    if set(state["trainable"]) != {n for n, p in current.items() if p.requires_grad}:
        raise ValueError(f"{path}: its weights do not match the model of config.toml")
    with torch.no_grad():
        for name, tensor in state["trainable"].items():
            current[name].copy_(tensor)
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    return int(state["step"])


def _inherit_eval_spec(base: str, final: Path) -> None:
    """final/execrl_eval.json, so that `execrl eval --model final` prompts the model as its
    base was prompted: the base's own spec when it has one (a model `execrl train` made), the
    one `execrl train` saves with its defaults when the base is the embedded default (which
    continues a `def` line: the tasks' prose prompts would get nothing from it); none for any
    other model, evaluated then as the benchmark's harness prompts it."""
    from execrl.models.default import is_default_model
    from execrl.rl.config import load_config
    from execrl.rl.eval_spec import HeldoutSpec, heldout_spec

    directory = Path(base).expanduser()
    spec = HeldoutSpec.load(directory) if directory.is_dir() else None
    if spec is None and is_default_model(base):
        spec = heldout_spec(load_config(None, []))
    if spec is not None:
        spec.save(final)


def _save_final(run_dir: Path, policy: Any, base: str) -> Path:
    """final/: the model (LoRA merged into the base), its tokenizer and the eval spec it inherits
    from `base`, loadable as model.path; written whole or not at all."""
    from execrl.rl.checkpoint import save_model_dir

    model = policy.model
    if hasattr(model, "merge_and_unload"):
        model = model.merge_and_unload()
    model.eval()
    final = run_dir / "final"

    def write(directory: Path) -> None:
        model.save_pretrained(directory)
        policy.tokenizer.save_pretrained(directory)
        _inherit_eval_spec(base, directory)

    save_model_dir(final, write)
    return final
