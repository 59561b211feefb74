"""`execrl train` under torchrun's c10d rendezvous, the one several machines use
(`--rdzv-backend c10d --rdzv-endpoint HOST:PORT`), as far as one machine allows: one node, two
processes, the rendezvous over loopback (docs/engines.md, "Several machines")."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_two_processes_meet_over_a_c10d_rendezvous_and_train_one_run(tiny_model_dir, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = [f"model.path={str(tiny_model_dir)!r}", f"run.out_dir={str(tmp_path)!r}",
                "run.name='run'", "run.steps=1", "rl.group_size=2", "rl.groups_per_step=2",
                "sampling.groups_per_generate=1", "sampling.max_new_tokens=8",
                "rl.dynamic_sampling=false", "data.heldout=''", "sandbox.workers=1",
                "run.trackers='none'"]  # fmt: skip
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1",
                "--nproc_per_node", "2", "--rdzv-backend", "c10d",
                "--rdzv-endpoint", f"localhost:{port}"]  # fmt: skip
    train = ["-m", "execrl.cli", "train", *[a for s in settings for a in ("--set", s)]]
    done = subprocess.run([*torchrun, *train], capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    # every process ends with the run's summary line; the step's two groups went one to each
    summaries = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(summaries) == 2 and summaries[0]["run_dir"] == summaries[1]["run_dir"]
    run = tmp_path / "run"
    assert (run / "final" / "config.json").is_file()
    assert len((run / "metrics.jsonl").read_text().splitlines()) == 1
    assert json.loads((run / "metrics.jsonl").read_text())["groups_kept"] == 2
