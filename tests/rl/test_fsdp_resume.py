"""Sharded checkpoints (dist.strategy = "fsdp"): a run saved by two processes resumes in one,
and one saved by one resumes in two, and goes on as the run that never stopped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from execrl.rl.run import train

from .conftest import LetterE, tasks, tiny_config
from .fsdp_helpers import joined, spawn_two

FSDP = "dist.strategy='fsdp'"


def _train(model_dir: Path, out: Path, *extra: str) -> None:
    config = tiny_config(model_dir, out, FSDP, *extra)
    train(config, tasks=tasks(), heldout=[], reward=LetterE(), quiet=True)


def _worker(rank: int, world: int, port: int, model_dir: Path, out: Path, extra) -> None:
    joined(rank, world, port)
    try:
        _train(model_dir, out, *extra)
    finally:
        torch.distributed.destroy_process_group()


def _rewards(run_dir: Path) -> list[float]:
    return [
        json.loads(x)["reward_mean"] for x in (run_dir / "metrics.jsonl").read_text().splitlines()
    ]


@pytest.mark.slow
@pytest.mark.parametrize("saved_by, resumed_by", [(2, 1), (1, 2)], ids=["2to1", "1to2"])
def test_sharded_checkpoint_resumes_on_another_number_of_processes(
    tiny_model_dir, tmp_path, monkeypatch, saved_by, resumed_by
):
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2]))
    torch.set_num_threads(1)
    # straight through, saving in the background every step (the last save waits)
    _train(tiny_model_dir, tmp_path / "a", "run.checkpoint_every=1")
    checkpoint = tmp_path / "a" / "run" / "checkpoint"
    assert [p.name for p in checkpoint.glob("shards-*")] == ["shards-4"]  # older ones pruned
    assert torch.load(checkpoint / "state.pt", weights_only=False)["shards"] == "shards-4"

    def run(processes: int, out: Path, *extra: str) -> None:
        if processes == 1:
            _train(tiny_model_dir, out, *extra)
        else:
            spawn_two(_worker, tiny_model_dir, out, extra)

    stopped = tmp_path / "b" / "run"
    run(saved_by, tmp_path / "b", "run.steps=2")
    run(resumed_by, tmp_path / "ignored", f"run.resume={str(stopped)!r}")
    assert _rewards(tmp_path / "a" / "run") == _rewards(stopped)
    a = load_file(str(tmp_path / "a" / "run" / "final" / "model.safetensors"))
    b = load_file(str(stopped / "final" / "model.safetensors"))
    for k in a:  # equal up to the rounding of two processes' sums (test_fsdp.py's tolerance)
        assert torch.allclose(a[k], b[k], atol=1e-4), (k, (a[k] - b[k]).abs().max().item())


def test_a_sharded_checkpoint_is_not_resumed_without_fsdp(tiny_model_dir, tmp_path):
    _train(tiny_model_dir, tmp_path, "run.steps=1")
    resumed = tiny_config(tiny_model_dir, tmp_path / "x", f"run.resume={str(tmp_path / 'run')!r}")
    with pytest.raises(ValueError, match="saved with dist.strategy = fsdp"):
        train(resumed, tasks=tasks(), heldout=[], reward=LetterE(), quiet=True)
