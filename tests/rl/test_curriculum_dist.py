"""Two processes draw what one does from a weighted mix under a pass_rate curriculum: each
process keeps its own sampler, told the same merged group summaries every step."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

from execrl.rl.config.config import load_config
from execrl.rl.run import train

from .conftest import LetterE

MIX = ["synthetic:difficulty=1,n=6", "synthetic:difficulty=mixed,n=12"]


def _config(model_dir: Path, out_dir: Path):
    return load_config(None, [
        f"model.path={str(model_dir)!r}", f"run.out_dir={str(out_dir)!r}", "run.name='run'",
        "data.heldout=''", f"data.train={MIX!r}", "data.weights=[1, 2]",
        "data.curriculum='pass_rate'", "data.curriculum_target=0.0", "data.curriculum_window=1",
        "run.steps=4", "rl.group_size=2", "rl.groups_per_step=4", "rl.dynamic_sampling=false",
        "sampling.max_new_tokens=6", "sampling.groups_per_generate=1", "sandbox.workers=1",
    ])  # fmt: skip


def _worker(rank: int, world: int, port: int, model_dir: Path, out_dir: Path) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world), LOCAL_RANK=str(rank))  # fmt: skip
    torch.set_num_threads(1)
    try:
        train(_config(model_dir, out_dir), reward=LetterE(), quiet=True)
    finally:
        torch.distributed.destroy_process_group()


def _drawn(run_dir: Path) -> list[dict]:
    """What each step drew: groups per source and the open level (rewards may differ in the
    last bits once two processes' all-reduce has rounded an update differently)."""
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k.endswith("/groups") or k == "curriculum/level"}
            for r in rows]  # fmt: skip


@pytest.mark.slow
def test_two_processes_draw_the_same_mix_and_levels_as_one(tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2]))
    torch.set_num_threads(1)
    train(_config(tiny_model_dir, tmp_path / "one"), reward=LetterE(), quiet=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_worker, args=(2, port, tiny_model_dir, tmp_path / "two"), nprocs=2, join=True)
    one, two = _drawn(tmp_path / "one" / "run"), _drawn(tmp_path / "two" / "run")
    assert len(one) == 4 and one == two
    assert [r["curriculum/level"] for r in one][:2] == [1, 2]  # the curriculum moved
