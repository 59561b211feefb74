"""`torchrun ... execrl train --set dist.strategy='fsdp'` end to end, and `execrl eval` of the
final/ that the two processes' shards were gathered into."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file

from execrl.cli import main


@pytest.mark.slow
def test_torchrun_trains_with_fsdp_and_eval_loads_its_final(tiny_model_dir, tmp_path, capsys):
    sets = [f"model.path={str(tiny_model_dir)!r}", "dist.strategy='fsdp'", "run.steps=2",
            "data.n_train=8", "data.n_heldout=4", "data.heldout_samples=2", "rl.group_size=2",
            "rl.groups_per_step=2", "rl.dynamic_sampling=false", "rl.entropy_coef=0.1",
            "sampling.max_new_tokens=8", "sampling.groups_per_generate=1", "sandbox.workers=1",
            f"run.out_dir={str(tmp_path)!r}", "run.name='r'"]  # fmt: skip
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc_per_node", "2", "-m", "execrl.cli", "train"]  # fmt: skip
    for item in sets:
        command += ["--set", item]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    run = tmp_path / "r"
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1]
    trained = json.loads((run / "summary.json").read_text())
    assert "heldout_pass@1_after" in trained
    assert main(["eval", "--model", str(run / "final"), "--out-dir", str(tmp_path / "eval"),
                 "--workers", "1", "--json"]) == 0  # fmt: skip
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["n_tasks"] == 4 and summary["samples_per_task"] == 2
    # final/ holds the trained weights, whole: not the start's (the entropy bonus moves them
    # when every reward is 0), not one process's shard
    before = load_file(str(tiny_model_dir / "model.safetensors"))
    after = load_file(str(run / "final" / "model.safetensors"))
    assert {k: v.shape for k, v in before.items()} == {k: v.shape for k, v in after.items()}
    assert any(not torch.equal(before[k], after[k]) for k in before)
