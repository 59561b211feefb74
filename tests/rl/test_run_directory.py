"""The run directory: one, chosen once, for every process of a run (issue 42: under torchrun
each process named it from its own clock, and the summary of one named a directory that did
not exist); and a name already taken is refused, not written over."""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch.distributed as torch_dist
import torch.multiprocessing as mp

from execrl.cli import main
from execrl.rl import setup
from execrl.rl.config.config import TrainConfig


def _choose(rank: int, init: str, out_dir: str, results: str) -> None:
    torch_dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    try:
        if rank == 1:  # reaches the choice over a second later: another second on its clock
            time.sleep(1.2)
        c = TrainConfig()
        c.run.out_dir = out_dir
        chosen = setup.run_directory(c)
        Path(results, str(rank)).write_text(str(chosen))
    finally:
        torch_dist.destroy_process_group()


def test_every_process_of_a_run_gets_the_directory_rank_0_chose(tmp_path):
    results = tmp_path / "chosen"
    results.mkdir()
    init = f"file://{tmp_path / 'rendezvous'}"
    mp.spawn(_choose, args=(init, str(tmp_path / "runs"), str(results)), nprocs=2)
    chosen = [(results / str(rank)).read_text() for rank in range(2)]
    assert chosen[0] == chosen[1], chosen
    assert [p.name for p in (tmp_path / "runs").iterdir()] == [Path(chosen[0]).name]


def test_a_run_name_already_taken_is_refused_before_anything_loads(tmp_path, capsys):
    taken = tmp_path / "demo"
    taken.mkdir()
    (taken / "metrics.jsonl").write_text('{"step": 0}\n')
    quick = [f"run.out_dir={str(tmp_path)!r}", "run.name='demo'", "run.steps=1",
             "data.heldout=''", "sampling.max_new_tokens=4", "run.trackers='none'"]  # fmt: skip
    code = main(["train", *[a for s in quick for a in ("--set", s)]])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert f"{taken} exists" in err and f"--resume {taken}" in err and "another run.name" in err
    assert json.loads((taken / "metrics.jsonl").read_text()) == {"step": 0}  # untouched
    assert sorted(p.name for p in taken.iterdir()) == ["metrics.jsonl"]
