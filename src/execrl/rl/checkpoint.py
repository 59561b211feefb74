"""Checkpoints: everything `--resume` needs, in `checkpoint/state.pt` of the run directory.

The state holds the policy, the critic, the optimizer, the schedule, the prompt sampler, both
RNGs and what the summary already knows (held-out pass@1 before training), so a resumed run
continues bit for bit as if it had never stopped and reports what the whole run measured.
Under dist.strategy = "fsdp" the policy, the critic and the optimizer are sharded: each process
writes its own shards beside state.pt, which names them (`rl.parallel.dist_checkpoint`).
"""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError

from execrl.rl.files.safe_load import UnsafeFile, load_weights
from execrl.rl.parallel import dist


def save_checkpoint(run_dir: Path, step: int, learner: Any, sampler: Any,
                    summary: dict[str, Any], *, last: bool = True) -> None:  # fmt: skip
    """Written atomically: a crash never leaves half a file. `last`: the run's final save, done
    before returning (a sharded save may otherwise go on in the background)."""
    state = {
        "step": step,
        "scheduler": learner.scheduler.state_dict(),
        "sampler": sampler.state_dict(),
        "torch_rng": torch.get_rng_state(),
        "python_rng": random.getstate(),
        "summary": dict(summary),
    }
    directory = run_dir / "checkpoint"
    shards = getattr(learner.strategy, "checkpoints", None)
    if shards is not None:  # FSDP: every process writes its shards, then state.pt names them
        shards.save(directory, step, learner,
                    lambda name: _write(directory, {**state, "shards": name}), last)  # fmt: skip
        return
    head = learner.value_head
    _write(directory, {
        **state,
        "model": learner.model.state_dict(),
        "value_head": head.state_dict() if head is not None else None,
        "optimizer": learner.optimizer.state_dict(),
    })  # fmt: skip


def _write(directory: Path, state: dict[str, Any]) -> None:
    if dist.rank() != 0:
        return
    directory.mkdir(exist_ok=True)
    save_atomic(state, directory / "state.pt")


def save_atomic(state: dict[str, Any], path: Path) -> None:
    """`torch.save` beside `path`, then renamed over it: a crash never leaves half a file. A save
    that fails (a full disk) removes its half, leaves a file already at `path` as it was, and
    names the file, the disk's free space and what to do. Every checkpoint file is written so:
    `execrl train`'s state and prefetched rollouts, `execrl sft`'s state."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        torch.save(state, tmp)
    except (OSError, RuntimeError) as error:  # a full disk reads "unexpected pos ..." from torch
        tmp.unlink(missing_ok=True)  # half a checkpoint would only keep the disk full
        raise _unwritable(path, "the checkpoint", error) from error
    os.replace(tmp, path)


def save_model_dir(directory: Path, write: Callable[[Path], None]) -> None:
    """A model directory (`final/`) written whole or not at all: `write` fills a directory
    beside it, which then takes its place. A write that fails (a full disk) removes its half,
    leaves a directory already there as it was, and names it, the free space and what to do."""
    tmp = directory.with_name(directory.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        write(tmp)
    except (OSError, RuntimeError, SafetensorError) as error:  # safetensors: "IoError(.. 28 ..)"
        shutil.rmtree(tmp, ignore_errors=True)
        raise _unwritable(directory, "the model", error) from error
    old = directory.with_name(directory.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if directory.exists():
        directory.rename(old)
    tmp.rename(directory)
    shutil.rmtree(old, ignore_errors=True)


class Unwritable(OSError):
    """A checkpoint or a model directory that could not be written (a full disk), said for a
    person: the path, the free space, what to do."""


def _unwritable(path: Path, what: str, error: BaseException) -> Unwritable:
    free_mib = shutil.disk_usage(path.parent).free / 2**20
    return Unwritable(
        f"{path}: {what} could not be written ({error}); its disk has {free_mib:.0f} MiB free. "
        f"Free some space or set run.out_dir to a larger disk (what was there before, if "
        "anything, is intact)"
    )


def load_checkpoint(run_dir: Path, learner: Any, sampler: Any) -> tuple[int, dict[str, Any]]:
    """Restore the state; (the step to continue from, the summary so far)."""
    path = run_dir / "checkpoint" / "state.pt"
    if not path.is_file():
        raise FileNotFoundError(
            f"--resume {run_dir}: no checkpoint/state.pt to resume from (a run saves one every "
            "run.checkpoint_every steps, at the end, and when it is interrupted)"
        )
    state = load_weights(path, map_location=learner.device)  # it may come from elsewhere
    sharded = getattr(learner.strategy, "checkpoints", None) is not None
    if sharded != ("shards" in state):
        raise ValueError(
            f"--resume {run_dir}: its checkpoint was saved with dist.strategy = "
            f"{'fsdp' if 'shards' in state else 'ddp'}, and this run trains with "
            f"{'fsdp' if sharded else 'ddp'}; resume it with the strategy it was saved with"
        )
    if sharded:
        from execrl.rl.parallel.dist_checkpoint import PREFIX, load_shards

        shards = str(state["shards"])
        if not (shards.startswith(PREFIX) and shards[len(PREFIX) :].isdigit()):  # a name, no path
            raise UnsafeFile(f"{path}: names shards {shards[:80]!r}, not {PREFIX}<step> beside "
                             "it; restore the run's checkpoint directory as it was saved")  # fmt: skip
        load_shards(path.parent / shards, learner)
    else:
        learner.model.load_state_dict(state["model"])
        if state["value_head"] is not None:
            learner.value_head.load_state_dict(state["value_head"])
        learner.optimizer.load_state_dict(state["optimizer"])
    learner.scheduler.load_state_dict(state["scheduler"])
    sampler.load_state_dict(state["sampler"])
    torch.set_rng_state(state["torch_rng"])
    random.setstate(state["python_rng"])
    return int(state["step"]), dict(state.get("summary", {}))
