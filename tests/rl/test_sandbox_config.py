"""[sandbox] and [sandbox.limits]: one SandboxConfig, its limits one `Limits`, given to the
scorer as they are; the old flat `[sandbox] wall_s / memory_mb` load with a deprecation message."""

from __future__ import annotations

import dataclasses
import json

import pytest

from execrl.rewards.scoring.config import RewardConfig, RewardConfigError, sandbox_config_of
from execrl.rewards.scoring.scorer import RewardScorer
from execrl.rl.config.config import ConfigError, load_config, resume_config, to_toml
from execrl.rl.eval_spec import HeldoutSpec, heldout_spec
from execrl.sandbox import Limits, SandboxConfig
from execrl.sandbox.config import MOVED_TO_LIMITS

NEW = """
[sandbox]
workers = 3
[sandbox.limits]
wall_s = 5.0
memory_mb = 1024
output_bytes = 4096
"""


def test_sandbox_limits_load_into_one_limits_record(tmp_path, capsys):
    path = tmp_path / "new.toml"
    path.write_text(NEW)
    config = load_config(path)
    assert config.sandbox.workers == 3
    assert config.sandbox.limits == Limits(wall_s=5.0, memory_mb=1024, output_bytes=4096)
    assert capsys.readouterr().err == ""
    saved = tmp_path / "run" / "config.toml"  # what a run directory keeps, read back the same
    saved.parent.mkdir()
    saved.write_text(to_toml(config))
    assert resume_config(saved.parent).sandbox == config.sandbox
    assert heldout_spec(config).limits == config.sandbox.limits  # saved with the model as is


def test_the_old_flat_limit_names_load_with_one_message_each(tmp_path, capsys):
    path = tmp_path / "old.toml"
    path.write_text("[sandbox]\nworkers = 1\nwall_s = 60.0\nmemory_mb = 512\nscratch_mb = 32\n")
    config = load_config(path)
    assert config.sandbox.limits == Limits(wall_s=60.0, memory_mb=512, scratch_mb=32)
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"execrl: {path}: sandbox.{name} is deprecated; it is sandbox.limits.{name} now "
        "([sandbox.limits], docs/sandbox.md)"
        for name in MOVED_TO_LIMITS
    ]
    saved = to_toml(config).split("[sandbox]\n")[1].split("\n\n")[0].splitlines()
    assert not any(line.startswith(MOVED_TO_LIMITS) for line in saved)  # the new name only


def test_one_limit_under_both_names_is_refused():
    with pytest.raises(
        ConfigError, match=r"sandbox\.wall_s and sandbox\.limits\.wall_s are the same"
    ):
        load_config(None, ["sandbox.wall_s=3", "sandbox.limits.wall_s=4"])


def test_the_scorer_runs_with_the_limits_it_is_given():
    box = SandboxConfig(workers=1, limits=Limits(wall_s=7.0, memory_mb=300))
    scorer = RewardScorer(RewardConfig(analysis_workers=0), sandbox=object(), sandbox_config=box)
    assert scorer.limits is box.limits and scorer.sandbox_config is box
    assert RewardScorer(RewardConfig(analysis_workers=0), sandbox=object()).limits == Limits(
        wall_s=2.0
    )  # no settings given: the defaults', as `execrl train`'s


def test_a_reward_files_sandbox_table_is_read_for_the_adapters(tmp_path, capsys):
    path = tmp_path / "reward.toml"
    path.write_text('[reward]\nprogram = "extract"\n[sandbox]\nworkers = 4\n'
                    "[sandbox.limits]\nwall_s = 9.0\n")  # fmt: skip
    assert RewardConfig.load(path).program == "extract"
    box = sandbox_config_of(path)
    assert box.workers == 4 and box.limits == Limits(wall_s=9.0)
    path.write_text("[sandbox]\nwall_s = 4.0\n")
    assert sandbox_config_of(path).limits == Limits(wall_s=4.0)
    assert "sandbox.wall_s is deprecated" in capsys.readouterr().err
    path.write_text("[sandbox.limits]\nwall_s = -1.0\n")
    with pytest.raises(RewardConfigError, match=r"sandbox\.limits\.wall_s must be above 0"):
        sandbox_config_of(path)


def test_a_spec_saved_before_sandbox_limits_loads_its_limits(tmp_path):
    spec = dataclasses.asdict(heldout_spec(load_config(None)))
    del spec["limits"]  # as execrl wrote it before [sandbox.limits]: two numbers
    (tmp_path / "execrl_eval.json").write_text(
        json.dumps({**spec, "wall_s": 2.5, "memory_mb": 512})
    )
    loaded = HeldoutSpec.load(tmp_path)
    assert loaded is not None and loaded.limits == Limits(wall_s=2.5, memory_mb=512)
    loaded.save(tmp_path)  # saved again: one `limits` object
    assert HeldoutSpec.load(tmp_path) == loaded
    assert "wall_s" not in json.loads((tmp_path / "execrl_eval.json").read_text())


def test_execrl_train_takes_both_names_and_refuses_a_bad_limit(monkeypatch, capsys):
    import execrl.cli.train_command as tc
    from execrl.cli import main

    seen = []
    monkeypatch.setattr(tc, "train_with_telemetry", lambda config: seen.append(config) or {})
    assert main(["train", "--set", "sandbox.wall_s=3", "--set", "sandbox.limits.cpu_s=2"]) == 0
    assert seen[0].sandbox.limits == Limits(wall_s=3.0, cpu_s=2.0)
    assert "sandbox.wall_s is deprecated" in capsys.readouterr().err
    assert main(["train", "--set", "sandbox.limits.wall_s=0"]) == 2
    err = capsys.readouterr().err
    assert "sandbox.limits.wall_s must be above 0" in err and "Traceback" not in err
    assert len(seen) == 1  # refused before anything ran
