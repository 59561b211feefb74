"""dist.strategy = "fsdp" in two processes (gloo) gives what one process without it gives: the
loss, the clipped gradients of the first update and the weights after three, for GRPO and PPO,
with and without LoRA, on a tiny Hugging Face Llama and on the embedded default's recipe."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from .fsdp_helpers import joined, spawn_two, three_updates

FSDP = "dist.strategy='fsdp'"
CASES = {
    "grpo": (),
    "ppo": ("rl.algorithm='ppo'", "rl.kl_in='reward'"),
    "grpo_lora": ("model.lora_r=4",),
    "ppo_lora": ("rl.algorithm='ppo'", "rl.kl_in='reward'", "model.lora_r=4"),
}
# Equal up to float rounding: FSDP sums the gradients in another order (reduce-scatter of each
# layer), runs one forward per row where one process shares a prompt's, and Adam divides
# near-zero gradients by their own square roots. One Adam step at lr 0.01 moves a weight by
# about 0.01; a missing or averaged reduction, a local clip norm or a lost micro-batch moves
# losses and gradients by whole percents and weights by whole steps.
LOSS_RTOL, GRAD_ATOL, WEIGHT_ATOL = 1e-5, 1e-6, 1e-4


def _worker(rank: int, world: int, port: int, model_dir: Path, out: Path,
            names: list[str]) -> None:  # fmt: skip
    joined(rank, world, port)
    try:
        for name in names:
            got = three_updates(model_dir, out / name, FSDP, *CASES[name])
            if rank == 0:
                torch.save(got, out / f"{name}.pt")
    finally:
        torch.distributed.destroy_process_group()


def _check(model_dir: Path, tmp_path: Path, monkeypatch, names: list[str]) -> None:
    # spawned processes import this module by its name (tests.rl...): give them the root
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2]))
    torch.set_num_threads(1)
    spawn_two(_worker, model_dir, tmp_path, names)
    for name in names:
        one = three_updates(model_dir, tmp_path / "one" / name, *CASES[name])
        two = torch.load(tmp_path / f"{name}.pt")
        assert two["loss"] == pytest.approx(one["loss"], rel=LOSS_RTOL), name
        assert two["grad_norm"] == pytest.approx(one["grad_norm"], rel=LOSS_RTOL), name
        assert one["grads"].keys() == two["grads"].keys() and one["grads"], name
        for key, grad in one["grads"].items():
            gap = (grad - two["grads"][key]).abs().max().item()
            assert gap <= GRAD_ATOL, (name, key, gap)
        for key, weight in one["weights"].items():
            gap = (weight - two["weights"][key]).abs().max().item()
            assert gap <= WEIGHT_ATOL, (name, key, gap)
        if "ppo" in name:
            assert any(k.startswith("value_head.") for k in one["grads"]), name


def test_fsdp_two_processes_update_as_one(tiny_model_dir, tmp_path, monkeypatch):
    """The default tier's, on the Llama: PPO (the value head, every weight of the policy) and
    GRPO with LoRA (the adapters alone); the slow ones below take every case."""
    _check(tiny_model_dir, tmp_path, monkeypatch, ["ppo", "grpo_lora"])


@pytest.mark.slow
def test_fsdp_two_processes_update_as_one_on_a_llama(tiny_model_dir, tmp_path, monkeypatch):
    _check(tiny_model_dir, tmp_path, monkeypatch, list(CASES))


@pytest.mark.slow
def test_fsdp_two_processes_update_as_one_on_the_default(tiny_default_dir, tmp_path,
                                                         monkeypatch):  # fmt: skip
    _check(tiny_default_dir, tmp_path, monkeypatch, list(CASES))
