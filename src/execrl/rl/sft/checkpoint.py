"""What an `execrl sft` run keeps on disk besides its logs: checkpoint/state.pt (the trainable
weights, the optimizer and the schedule at a step, for --resume) and final/ (the model, LoRA
merged in, with its tokenizer: a valid `model.path` for `execrl train`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from execrl.rl.checkpoint import save_atomic, save_model_dir
from execrl.rl.files.safe_load import load_weights


def _trainable(model: Any) -> dict[str, torch.Tensor]:
    return {n: p.detach().cpu() for n, p in model.named_parameters() if p.requires_grad}


def save_checkpoint(run_dir: Path, step: int, model: Any, optimizer: Any, scheduler: Any) -> None:
    """checkpoint/state.pt, written beside and renamed (`rl.checkpoint.save_atomic`)."""
    state = {
        "step": step,
        "trainable": _trainable(model),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
    }
    (run_dir / "checkpoint").mkdir(exist_ok=True)
    save_atomic(state, run_dir / "checkpoint" / "state.pt")


def load_checkpoint(run_dir: Path, model: Any, optimizer: Any, scheduler: Any) -> int:
    """The step checkpoint/state.pt was saved at, its weights and states put in place."""
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
    from execrl.models.loading.default import is_default_model
    from execrl.rl.config.config import load_config
    from execrl.rl.eval_spec import HeldoutSpec, heldout_spec

    directory = Path(base).expanduser()
    spec = HeldoutSpec.load(directory) if directory.is_dir() else None
    if spec is None and is_default_model(base):
        spec = heldout_spec(load_config(None, []))
    if spec is not None:
        spec.save(final)


def save_final(run_dir: Path, policy: Any, base: str) -> Path:
    """final/: the model (LoRA merged into the base), its tokenizer and the eval spec it inherits
    from `base`, loadable as model.path; written whole or not at all."""
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
