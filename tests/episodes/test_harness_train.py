"""End to end: `execrl train` with `[env] name = "harness"`: a tiny model with a chat template,
the two-call fixture agent runs every episode against the policy server, and the recorded
trajectories train the policy (its parameters change)."""

from __future__ import annotations

import json
import sys

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


def test_execrl_train_on_harness_episodes_changes_the_policy(chat_model_dir, tmp_path, capsys):  # noqa: F811
    harness = f"{sys.executable} {AGENT}"
    config = tmp_path / "harness.toml"
    config.write_text(
        f"[model]\npath = {str(chat_model_dir)!r}\n"
        "[data]\ntrain = 'synthetic'\nheldout = 'synthetic'\nn_train = 4\nn_heldout = 2\n"
        "heldout_samples = 1\n"
        "[sampling]\nmax_new_tokens = 8\ngroups_per_generate = 2\n"
        "[rl]\ngroup_size = 4\ngroups_per_step = 2\ndynamic_sampling = false\n"
        "[optim]\nlr = 0.01\n"
        f"[run]\nsteps = 2\nout_dir = {str(tmp_path)!r}\nname = 'h'\n"
        "[sandbox]\nworkers = 1\n"
        f"[env]\nname = 'harness'\nharness = {harness!r}\nharness_parallel = 4\n" + REWARD
    )
    assert main(["train", "--config", str(config)]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["steps"] == 2 and len(summary["heldout_pass@1_by_turn_after"]) == 2
    rows = [json.loads(x) for x in (tmp_path / "h" / "metrics.jsonl").read_text().splitlines()]
    # every episode is the agent's two calls, and none was masked (the agent never failed)
    assert all(r["episode/turns_mean"] == 2.0 for r in rows)
    assert all(r["skipped_update"] == 0.0 for r in rows)
    from transformers import AutoModelForCausalLM

    before = AutoModelForCausalLM.from_pretrained(chat_model_dir).state_dict()
    after = AutoModelForCausalLM.from_pretrained(tmp_path / "h" / "final").state_dict()
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert changed, "training on the harness's episodes changed no parameter"
    assert 'name = "harness"' in (tmp_path / "h" / "config.toml").read_text()


def test_a_harness_config_error_names_the_field_before_any_model_loads(tmp_path, capsys):
    assert main(["train", "--set", "env.name='harness'"]) == 2
    assert "env.harness" in capsys.readouterr().err
    assert main(["train", "--set", "env.name='harness'", "--set",
                 "env.harness='no-such-agent-program --x'"]) == 2  # fmt: skip
    assert "no program 'no-such-agent-program'" in capsys.readouterr().err
    assert main(["train", "--set", "env.harness='python a.py'"]) == 2  # without env.name
    assert "go together" in capsys.readouterr().err
