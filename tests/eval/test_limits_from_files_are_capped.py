"""Limits and sizes read from a file are capped: a model directory's execrl_eval.json that asks
for a day of wall clock, a terabyte of memory and scratch and 100,000 processes is evaluated
with `tasks.limit_caps`' caps (it was evaluated as given), and a --benchmark other than the
spec's is graded with each task's own limits, not the spec's (it got the spec's). Every loader
that reads limits from a file goes through the one capping function (`capped`): task files
(jsonl, Code Jam; the contest loaders in tests/tasks/test_contest_loaders.py), eval specs, the
train config and a reward file's [sandbox.limits]. Each was seen failing before the caps."""

from __future__ import annotations

import dataclasses
import gzip
import json

import pytest

from execrl.cli import main
from execrl.rl.eval_spec import HeldoutSpec
from execrl.sandbox.grading.limits import Limits
from execrl.tasks import CallTests, Task, TimeLimit
from execrl.tasks.catalog.registry import load_benchmark
from execrl.tasks.jsonl import write_tasks
from execrl.tasks.limit_caps import CAPPED, CAPS, LimitCaps

GREEDY = Limits(wall_s=86400.0, test_wall_s=86400.0, cpu_s=86400.0, memory_mb=1 << 20,
                output_bytes=1 << 40, file_size_mb=1 << 20, open_files=10**6, processes=100_000,
                scratch_mb=1 << 20, compile_wall_s=86400.0)  # fmt: skip
CAPPED_LIMITS = Limits(**{name: getattr(CAPS, name) for name in CAPPED})
TASKS = [Task(id="t0", prompt="Write f(x) returning x.", tests=CallTests(((1,),), (1,)),
              entry_point="f", time_limits={"tests": TimeLimit(wall_s=2.0, test_wall_s=1.0)})]  # fmt: skip


def test_every_limit_has_a_cap():
    """A limit added to `Limits` without a cap would come from a file as given."""
    assert CAPPED == tuple(f.name for f in dataclasses.fields(Limits))
    assert all(isinstance(getattr(LimitCaps(), name), (int, float)) for name in CAPPED)


@pytest.fixture(scope="module")
def greedy_model(tmp_path_factory):
    """A tiny model directory whose execrl_eval.json asks for a day, a terabyte and 100,000
    processes, on a held-out set of one task."""
    from execrl.models.loading.tiny import (
        TinyLlamaShape,
        new_llama,
        save_pretrained,
        train_bpe_tokenizer,
    )
    from execrl.rl.config.config import load_config
    from execrl.rl.eval_spec import heldout_spec

    root = tmp_path_factory.mktemp("greedy")
    tasks_file = root / "tasks.jsonl"
    write_tasks(tasks_file, TASKS)
    tokenizer = train_bpe_tokenizer(["def f(x):\n    return x\n"] * 20, vocab_size=300)
    shape = TinyLlamaShape(hidden=32, layers=1, heads=2, kv_heads=1, intermediate=64)
    model = save_pretrained(new_llama(tokenizer, shape, seed=0), tokenizer, root / "model")
    spec = heldout_spec(load_config(None, [f"data.heldout='jsonl:{tasks_file}'"]))
    spec = dataclasses.replace(spec, limits=GREEDY, samples_per_task=1, max_new_tokens=4)
    spec.save(model)
    return model, tasks_file


def evaluate(model, out, *extra) -> dict:
    args = ["eval", "--model", str(model), "--out-dir", str(out), "--workers", "1", "--json"]
    assert main([*args, *extra]) == 0
    return out


def test_an_eval_spec_asking_for_a_day_and_a_terabyte_is_capped(greedy_model, tmp_path, capsys):
    model, _ = greedy_model
    assert HeldoutSpec.load(model).limits == CAPPED_LIMITS
    assert "limits over execrl's caps lowered: wall_s 86400.0 to 1800.0" in capsys.readouterr().err
    evaluate(model, tmp_path / "e")
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["as_trained"]["limits"] == dataclasses.asdict(CAPPED_LIMITS)


def test_another_benchmark_is_graded_with_its_own_limits(greedy_model, tmp_path, capsys):
    model, tasks_file = greedy_model
    other = tmp_path / "other.jsonl"
    write_tasks(other, TASKS)
    evaluate(model, tmp_path / "e", "--benchmark", f"jsonl:{other}")
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["as_trained"]["limits"] is None  # each task's own: `run_heldout`
    # --timeout still sets the wall clock of each run, on the defaults' other limits
    evaluate(model, tmp_path / "t", "--benchmark", f"jsonl:{other}", "--timeout", "5")
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["as_trained"]["limits"] == dataclasses.asdict(Limits(wall_s=5.0))


def test_a_task_file_asking_for_a_day_is_capped(tmp_path):
    greedy = {"tests": TimeLimit(wall_s=86400.0, test_wall_s=86400.0, memory_mb=1 << 20)}
    path = tmp_path / "tasks.jsonl"
    write_tasks(path, [dataclasses.replace(TASKS[0], time_limits=greedy)])
    (task,) = load_benchmark(f"jsonl:{path}")
    assert task.time_limits["tests"] == TimeLimit(1800.0, 30.0, 4096)


def test_a_codejam_statement_asking_for_a_day_is_capped(tmp_path):
    from execrl.tasks.codejam import read_codejam

    record = {"problem_id": "p", "name": "P", "statement": "Time limit: 86400 seconds per test",
              "output_validator_flags": "", "tests": [{"input": "1\n", "output": "1\n"}] * 3}  # fmt: skip
    path = tmp_path / "codejam.jsonl.gz"
    path.write_bytes(gzip.compress((json.dumps(record) + "\n").encode()))
    (task,) = read_codejam(path)
    assert task.time_limits["tests"] == TimeLimit(wall_s=1800.0, test_wall_s=30.0)


def test_config_limits_are_capped(tmp_path, capsys):
    from execrl.rewards.scoring.config import sandbox_config_of
    from execrl.rl.config.config import load_config

    sets = [f"sandbox.limits.{name}={getattr(GREEDY, name)!r}" for name in CAPPED]
    assert load_config(None, sets).sandbox.limits == CAPPED_LIMITS
    assert "[sandbox.limits]: limits over execrl's caps lowered" in capsys.readouterr().err
    reward_file = tmp_path / "reward.toml"
    table = "".join(f"{name} = {getattr(GREEDY, name)!r}\n" for name in CAPPED)
    reward_file.write_text(f"[sandbox.limits]\n{table}")
    assert sandbox_config_of(reward_file, say=lambda m: None).limits == CAPPED_LIMITS
