"""torch's CPU threads chosen for the cores actually free (issue 29 item 2), through
`execrl train`, its resume and `execrl eval` (`execrl sft`: tests/test_sft_cli.py)."""

from __future__ import annotations

import json
import os

import torch

from execrl.cli import main
from execrl.models import heap
from execrl.rl import setup


def _machine(monkeypatch, load: float) -> None:
    """This process sees 2 cores at `load`, and no thread variable of the user's."""
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))


def _threads_in_setup(monkeypatch) -> list[int]:
    """torch's thread count when each run's set-up starts (the model built and loaded after)."""
    seen: list[int] = []
    build = setup.build

    def spy(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        seen.append(torch.get_num_threads())
        return build(*args, **kwargs)

    monkeypatch.setattr(setup, "build", spy)
    return seen


def _train_args(model_dir, out_dir, *extra: str) -> list[str]:
    small = [f"model.path={str(model_dir)!r}", "data.n_train=4", "data.heldout=''",
             "run.steps=1", "rl.group_size=2", "rl.groups_per_step=2", "sandbox.workers=2",
             "sampling.max_new_tokens=4", f"run.out_dir={str(out_dir)!r}", "run.name='busy'",
             "run.checkpoint_every=1", "run.trackers=none", *extra]  # fmt: skip
    return ["train", *sum((["--set", s] for s in small), [])]


def test_a_busy_machine_trains_on_no_more_threads_than_its_free_cores(
    tiny_model_dir, tmp_path, monkeypatch, capsys
):
    """Two CPU hogs beside a 2-core run: one torch thread (torch's default was one per core,
    which spun against the hogs and the sandbox workers), said in the run's first line; the
    count is saved, so a resume on a quiet machine computes as the run did; torch's own
    setting comes back after the run."""
    _machine(monkeypatch, 4.0)
    seen = _threads_in_setup(monkeypatch)
    torch.set_num_threads(2)
    assert main(_train_args(tiny_model_dir, tmp_path)) == 0
    err = capsys.readouterr().err
    assert err.splitlines()[0] == (
        "threads: torch uses 1 (2 cores, load average 4.0 at start, 2 sandbox workers beside "
        "it; set model.threads or OMP_NUM_THREADS to choose)"
    )
    assert seen == [1] and torch.get_num_threads() == 2
    assert "threads = 1" in (tmp_path / "busy" / "config.toml").read_text()
    _machine(monkeypatch, 0.0)  # quiet now: a new run would take 2
    assert main(["train", "--resume", str(tmp_path / "busy"), "--set", "run.steps=2"]) == 0
    assert seen == [1, 1]
    assert "torch uses 1 (model.threads = 1)" in capsys.readouterr().err


def test_eval_chooses_threads_as_train_does(tiny_model_dir, tmp_path, monkeypatch, capsys):
    """...and sets the heap policy as train does (`models.heap`)."""
    _machine(monkeypatch, 3.0)
    policy: list[str] = []
    monkeypatch.setattr(heap, "keep_heap_small", lambda: policy.append("set") or "")
    bench = tmp_path / "tasks.jsonl"
    task = {"task_id": "t/0", "prompt": "def add(a, b):\n", "entry_point": "add",
            "canonical_solution": "    return a + b\n",
            "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n"}  # fmt: skip
    bench.write_text(json.dumps(task) + "\n")
    args = ["eval", "--model", str(tiny_model_dir), "--benchmark", f"jsonl:{bench}",
            "--max-new-tokens", "4", "--workers", "1", "--out-dir", str(tmp_path / "ev")]  # fmt: skip
    assert main(args) == 0
    assert (
        "execrl eval: threads: torch uses 1 (2 cores, load average 3.0" in capsys.readouterr().err
    )
    assert policy == ["set"]
    assert main([*args, "--threads", "-1"]) == 2
    assert "--threads -1: give 0" in capsys.readouterr().err
