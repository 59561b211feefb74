"""End to end: `execrl train` with `[env] name = "harness"`: a tiny model with a chat template,
the two-call fixture agent runs every episode against the policy server, and the recorded
trajectories train the policy (its parameters change)."""

from __future__ import annotations

import json
import sys

import pytest
import torch

from execrl.cli import main

from .test_harness import AGENT
from .test_serve_policy_cli import chat_model_dir  # noqa: F401 - the fixture

# pass_fraction in the sandbox, plus a length term so that a random tiny model's episodes differ
# in reward (it never passes): the group advantages are not all zero and the update moves
REWARD = """
[reward.tree]
type = "sum"
[[reward.tree.terms]]
weight = 1.0
reward = { type = "pass_fraction" }
[[reward.tree.terms]]
weight = 1.0
reward = { type = "length", target = 0, per_unit = 0.01, max_penalty = 1.0, unit = "chars" }
"""


def harness_config(model_dir, tmp_path, *agent_flags: str, steps: int = 2):
    harness = " ".join([sys.executable, str(AGENT), *agent_flags])
    config = tmp_path / "harness.toml"
    config.write_text(
        f"[model]\npath = {str(model_dir)!r}\n"
        "[data]\ntrain = 'synthetic'\nheldout = 'synthetic'\nn_train = 4\nn_heldout = 2\n"
        "heldout_samples = 1\n"
        "[sampling]\nmax_new_tokens = 8\ngroups_per_generate = 2\n"
        "[rl]\ngroup_size = 4\ngroups_per_step = 2\ndynamic_sampling = false\n"
        "[optim]\nlr = 0.01\n"
        f"[run]\nsteps = {steps}\nout_dir = {str(tmp_path)!r}\nname = 'h'\n"
        "[sandbox]\nworkers = 1\n"
        f"[env]\nname = 'harness'\nharness = {harness!r}\nharness_parallel = 4\n" + REWARD
    )
    return config


def changed_parameters(model_dir, run_dir) -> list[str]:
    from transformers import AutoModelForCausalLM

    before = AutoModelForCausalLM.from_pretrained(model_dir).state_dict()
    after = AutoModelForCausalLM.from_pretrained(run_dir / "final").state_dict()
    return [k for k in before if not torch.equal(before[k], after[k])]


def test_execrl_train_on_harness_episodes_changes_the_policy(chat_model_dir, tmp_path, capsys):  # noqa: F811
    config = harness_config(chat_model_dir, tmp_path)
    assert main(["train", "--config", str(config)]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["steps"] == 2 and len(summary["heldout_pass@1_by_turn_after"]) == 2
    rows = [json.loads(x) for x in (tmp_path / "h" / "metrics.jsonl").read_text().splitlines()]
    # every episode is the agent's two calls, and none was masked (the agent never failed)
    assert all(r["episode/turns_mean"] == 2.0 for r in rows)
    assert all(r["skipped_update"] == 0.0 for r in rows)
    assert all(r["episode/segment_samples"] == 0 for r in rows)  # one conversation each
    changed = changed_parameters(chat_model_dir, tmp_path / "h")
    assert changed, "training on the harness's episodes changed no parameter"
    assert 'name = "harness"' in (tmp_path / "h" / "config.toml").read_text()


def test_execrl_train_learns_a_rewritten_history_segment_by_segment(
    chat_model_dir,  # noqa: F811
    tmp_path,
    capsys,
):
    """The agent drops its first answer from the second call's history: every episode has two
    segments, and both are trained (with GRPO), none masked."""
    config = harness_config(chat_model_dir, tmp_path, "--rewrite", steps=1)
    assert main(["train", "--config", str(config)]) == 0
    err = capsys.readouterr().err
    assert "episodes masked" not in err, err
    [row] = [json.loads(x) for x in (tmp_path / "h" / "metrics.jsonl").read_text().splitlines()]
    # 2 groups of 4 episodes, each with one segment beside the one holding its last call
    assert row["episode/segment_samples"] == 8 and row["skipped_update"] == 0.0
    assert row["episode/turns_mean"] == 2.0  # both calls counted, across the segments
    assert changed_parameters(chat_model_dir, tmp_path / "h")


def test_a_harness_config_error_names_the_field_before_any_model_loads(tmp_path, capsys):
    assert main(["train", "--set", "env.name='harness'"]) == 2
    assert "env.harness" in capsys.readouterr().err
    assert main(["train", "--set", "env.name='harness'", "--set",
                 "env.harness='no-such-agent-program --x'"]) == 2  # fmt: skip
    assert "no program 'no-such-agent-program'" in capsys.readouterr().err
    assert main(["train", "--set", "env.harness='python a.py'"]) == 2  # without env.name
    assert "go together" in capsys.readouterr().err


def test_a_harness_that_fails_every_episode_stops_execrl_train_with_its_error(
    chat_model_dir,  # noqa: F811
    tmp_path,
    capsys,
):
    config = harness_config(chat_model_dir, tmp_path, "--sleep", "30", steps=1)
    assert main(["train", "--config", str(config), "--set", "env.harness_timeout_s=0.2"]) == 2
    err = capsys.readouterr().err
    assert "execrl train: error: env.harness" in err and "timed out after 0.2 s" in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "extra", [["--set", "rl.algorithm='ppo'"], ["--set", "credit.segments='last'"]]
)
def test_the_last_segment_alone_trains_under_ppo_or_when_asked(
    chat_model_dir,  # noqa: F811
    tmp_path,
    capsys,
    extra,
):
    """PPO's values and returns run along one sequence: an agent that rewrites its history
    trains through the segment holding its final call, the others left out, none masked."""
    config = harness_config(chat_model_dir, tmp_path, "--rewrite", steps=1)
    assert main(["train", "--config", str(config), *extra]) == 0
    assert "episodes masked" not in capsys.readouterr().err
    [row] = [json.loads(x) for x in (tmp_path / "h" / "metrics.jsonl").read_text().splitlines()]
    assert row["episode/segment_samples"] == 0 and row["skipped_update"] == 0.0
    assert row["episode/turns_mean"] == 2.0  # both calls made, one of them trained
    assert changed_parameters(chat_model_dir, tmp_path / "h")
