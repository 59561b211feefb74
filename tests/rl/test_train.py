"""Smoke, resume and two-process tests of the training loop on a tiny random model."""

import json
import os
import socket
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp
from safetensors.torch import load_file

from execrl.rl.metrics import of_the_run
from execrl.rl.objective import algorithms
from execrl.rl.run import train

from .conftest import LetterE, tasks, tiny_config


def _weights(run_dir):
    return load_file(str(run_dir / "final" / "model.safetensors"))


def _rows(run_dir):
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [of_the_run(r) for r in rows]


def assert_learned(model_dir, run_dir):
    """The run's final weights differ from the model's and its reward rose (the mean of the
    last two steps over the first two); its metric rows."""
    before = load_file(str(model_dir / "model.safetensors"))
    after = _weights(run_dir)
    assert any(not torch.equal(before[k], after[k]) for k in before)
    rows = _rows(run_dir)
    first = sum(r["reward_mean"] for r in rows[:2]) / 2
    last = sum(r["reward_mean"] for r in rows[-2:]) / 2
    assert last > first, (first, last)
    return rows


def test_few_steps_change_parameters_and_raise_reward(tiny_model_dir, tmp_path):
    config = tiny_config(tiny_model_dir, tmp_path, "run.steps=8", "rl.dynamic_sampling=false")
    summary = train(config, tasks=tasks(), heldout=[], reward=LetterE(), quiet=True)
    assert_learned(tiny_model_dir, tmp_path / "run")
    assert summary["steps"] == 8 and (tmp_path / "run" / "config.toml").is_file()


@pytest.mark.parametrize("algorithm", algorithms.names())  # every record registered in execrl
def test_every_algorithm_runs_a_step(tiny_model_dir, tmp_path, algorithm):
    extra = ["run.steps=1", f"rl.algorithm={algorithm!r}", "rl.kl_coef=0.1", "rl.entropy_coef=0.01"]
    if algorithm == "reinforce_pp":
        extra.append("rl.kl_in='reward'")
    train(
        tiny_config(tiny_model_dir, tmp_path, *extra),
        tasks=tasks(),
        heldout=[],
        reward=LetterE(),
        quiet=True,
    )
    row = _rows(tmp_path / "run")[0]
    assert row["skipped_update"] == 0.0 and row["kl"] >= 0.0


@pytest.mark.slow
def test_resume_continues_as_if_never_stopped(tiny_model_dir, tmp_path):
    straight = tiny_config(tiny_model_dir, tmp_path / "a", "run.checkpoint_every=2")
    train(straight, tasks=tasks(), heldout=[], reward=LetterE(), quiet=True)
    stopped = tiny_config(tiny_model_dir, tmp_path / "b", "run.steps=2")
    train(stopped, tasks=tasks(), heldout=[], reward=LetterE(), quiet=True)
    resumed = tiny_config(
        tiny_model_dir, tmp_path / "ignored", f"run.resume={str(tmp_path / 'b' / 'run')!r}"
    )
    train(resumed, tasks=tasks(), heldout=[], reward=LetterE(), quiet=True)
    assert _rows(tmp_path / "a" / "run") == _rows(tmp_path / "b" / "run")
    a, b = _weights(tmp_path / "a" / "run"), _weights(tmp_path / "b" / "run")
    assert all(torch.equal(a[k], b[k]) for k in a)


def _worker(rank, world, port, model_dir, out_dir, extra=()):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world), LOCAL_RANK=str(rank))  # fmt: skip
    torch.set_num_threads(1)
    try:
        train(
            tiny_config(model_dir, out_dir, *extra),
            tasks=tasks(),
            heldout=[],
            reward=LetterE(),
            quiet=True,
        )
    finally:
        torch.distributed.destroy_process_group()


@pytest.mark.slow
@pytest.mark.parametrize(
    # REINFORCE++ normalises over the global batch: its record's batch_sums are all-reduced
    "extra",
    [(), ("rl.algorithm='reinforce_pp'",)],
    ids=["grpo", "reinforce_pp"],
)
def test_two_processes_equal_one(tiny_model_dir, tmp_path, monkeypatch, extra):
    # spawned processes import this module by its name (tests.rl.test_train): give them the root
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2]))
    torch.set_num_threads(1)
    train(
        tiny_config(tiny_model_dir, tmp_path / "one", *extra),
        tasks=tasks(),
        heldout=[],
        reward=LetterE(),
        quiet=True,
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_worker, args=(2, port, tiny_model_dir, tmp_path / "two", extra), nprocs=2, join=True)
    one, two = _weights(tmp_path / "one" / "run"), _weights(tmp_path / "two" / "run")
    # Equal up to rounding: the all-reduce sums the gradient in another order, and Adam turns
    # rounding in near-zero gradients into update noise. 1e-4 is 1 % of one Adam step at the
    # config's lr of 0.01; a wrong batch or a missing sync moves weights by whole steps.
    for k in one:
        assert torch.allclose(one[k], two[k], atol=1e-4), (k, (one[k] - two[k]).abs().max().item())
    r1, r2 = _rows(tmp_path / "one" / "run"), _rows(tmp_path / "two" / "run")
    assert [r["reward_mean"] for r in r1] == [r["reward_mean"] for r in r2]
