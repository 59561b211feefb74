"""`execrl train` with dist.strategy = "fsdp": its config, its options in one process (a process
group of one), and whole runs in two processes against one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from execrl.rl import setup
from execrl.rl.config.config import ConfigError, load_config
from execrl.rl.parallel import dist
from execrl.rl.parallel.fsdp import decoder_layers
from execrl.rl.run import train

from .conftest import LetterE, tasks, tiny_config
from .fsdp_helpers import batches, joined, spawn_two

FSDP = "dist.strategy='fsdp'"


@pytest.mark.parametrize(
    ("overrides", "says"),
    [
        (["dist.strategy='zero3'"], "strategy = 'zero3'; choose one of ddp, fsdp"),
        (["dist.param_dtype='bfloat16'"], "param_dtype is FSDP's: set strategy = 'fsdp'"),
        ([FSDP, "dist.reduce_dtype='fp8'"], "reduce_dtype = 'fp8'; choose one of float32"),
        ([FSDP, "rl.max_staleness=1"], "set rl.max_staleness = 0"),
    ],
)
def test_dist_config_errors_name_the_field_and_the_fix(overrides, says):
    with pytest.raises(ConfigError, match=says.replace("(", r"\(")):
        load_config(None, overrides)


def _rows(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_fsdp_options_train_ppo_in_one_process(tiny_model_dir, tmp_path):
    """Mixed precision, CPU offload and activation checkpointing together, under PPO (the value
    head reads the hidden states): before the full forward stopped asking for a KV cache, the
    recomputed layers appended their keys to it twice and backward failed."""
    options = ["dist.param_dtype='bfloat16'", "dist.reduce_dtype='float32'",
               "dist.cpu_offload=true", "dist.activation_checkpointing=true"]  # fmt: skip
    config = tiny_config(tiny_model_dir, tmp_path, "run.steps=2", "rl.algorithm='ppo'", FSDP,
                         *options)  # fmt: skip
    train(config, tasks=tasks(), heldout=[], reward=LetterE(), quiet=True)
    rows = _rows(tmp_path / "run")
    assert [r["skipped_update"] for r in rows] == [0.0, 0.0]
    assert all(r["grad_norm"] > 0 and r["value_loss"] > 0 for r in rows)
    assert (tmp_path / "run" / "final" / "model.safetensors").is_file()
    assert not dist.active()  # the group of one is left with the run


def _worker(rank: int, world: int, port: int, model_dir: Path, out: Path, extra) -> None:
    joined(rank, world, port)
    try:
        config = tiny_config(model_dir, out, "run.steps=3", FSDP, *extra)
        train(config, tasks=tasks(), heldout=[], reward=LetterE(), quiet=True)
    finally:
        torch.distributed.destroy_process_group()


@pytest.mark.slow
@pytest.mark.parametrize(
    # GRPO with a KL penalty: the reference, sharded, gathered with the policy; REINFORCE++:
    # its batch-wide normalisation summed over both processes' rows
    "extra",
    [("rl.kl_coef=0.1",), ("rl.algorithm='ppo'",),
     ("rl.algorithm='reinforce_pp'", "rl.kl_in='reward'", "rl.kl_coef=0.1")],
    ids=["grpo_kl", "ppo", "reinforce_pp"],
)  # fmt: skip
def test_fsdp_training_in_two_processes_equals_one(tiny_model_dir, tmp_path, monkeypatch, extra):
    """Three whole steps (sampling on the gathered policy, advantages, update, final/ gathered
    to rank 0) against one process without FSDP: the same rewards, grad norms to rounding, and
    the weights within 1e-4 (1 % of one Adam step at lr 0.01; test_fsdp.py says why)."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2]))
    torch.set_num_threads(1)
    config = tiny_config(tiny_model_dir, tmp_path / "one", "run.steps=3", *extra)
    train(config, tasks=tasks(), heldout=[], reward=LetterE(), quiet=True)
    spawn_two(_worker, tiny_model_dir, tmp_path / "two", extra)
    one, two = _rows(tmp_path / "one" / "run"), _rows(tmp_path / "two" / "run")
    assert [r["reward_mean"] for r in one] == [r["reward_mean"] for r in two]
    assert [r["grad_norm"] for r in two] == pytest.approx([r["grad_norm"] for r in one], rel=1e-4)
    a = load_file(str(tmp_path / "one" / "run" / "final" / "model.safetensors"))
    b = load_file(str(tmp_path / "two" / "run" / "final" / "model.safetensors"))
    assert a.keys() == b.keys()
    for k in a:
        assert torch.allclose(a[k], b[k], atol=1e-4), (k, (a[k] - b[k]).abs().max().item())


def test_activation_checkpointing_recomputes_each_layer_in_backward(tiny_model_dir, tmp_path):
    """A decoder layer's MLP starts twice per micro-batch with the option (its forward, then
    again in backward; a pre-hook, since the recomputation stops once it has what backward
    needs), once without."""
    calls = {}
    for on in ("false", "true"):
        config = tiny_config(tiny_model_dir, tmp_path / on, FSDP,
                             f"dist.activation_checkpointing={on}")  # fmt: skip
        with dist.group_of_one(True):
            built = setup.build(config, tasks(), [])
            seen: list[int] = []
            mlp = decoder_layers(built.learner.model)[0].mlp
            mlp.register_forward_pre_hook(lambda *_, seen=seen: seen.append(1))
            mine, denominator = batches(built.policy.tokenizer.pad_token_id, values=False)
            built.learner.update(mine, denominator)
        calls[on] = len(seen)
    assert calls["true"] == 2 * calls["false"] == 2 * len(mine)


def test_fsdp_samples_with_hugging_face_generate_under_lora(tiny_model_dir, tmp_path):
    """generate under PEFT calls the model inside FSDP's root: before the root's first forward
    ran at set-up, each layer set itself up as a root of its own and the update failed."""
    config = tiny_config(tiny_model_dir, tmp_path, "run.steps=2", FSDP, "sampling.engine='hf'",
                         "model.lora_r=4", "rl.kl_coef=0.1")  # fmt: skip
    train(config, tasks=tasks(), heldout=[], reward=LetterE(), quiet=True)
    assert [r["skipped_update"] for r in _rows(tmp_path / "run")] == [0.0, 0.0]


def test_execrl_train_refuses_fsdp_with_a_rollout_thread_before_loading_anything(capsys):
    from execrl.cli import main

    assert main(["train", "--set", FSDP, "--set", "rl.max_staleness=1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "dist.strategy" in err[0] and "Traceback" not in err[0]


def test_a_group_of_one_leaves_no_reference_to_itself_in_dtensors_cache():
    """The default tier hung in a forked child (the sandbox's reaper, forked from a thread)
    destroying a gloo group that DTensor's thread-local cache still held: the group of one
    frees it on the way out, while its threads exist."""
    from torch.distributed.fsdp import fully_shard

    from execrl.rl.parallel import dist

    with dist.group_of_one(True):
        model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 1))
        fully_shard(model[0])
        fully_shard(model)
        model(torch.ones(2, 4)).sum().backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        assert sum(torch._C._get_DTensor_sharding_propagator_cache_stats()) > 0
    assert torch._C._get_DTensor_sharding_propagator_cache_stats() == (0, 0)
