"""End-to-end: `execrl train --config FILE --set ...` on the procedural suite with a tiny model."""

import json
import re

from execrl.cli import main


def test_train_cli_end_to_end(tiny_model_dir, tmp_path, capsys):
    config = tmp_path / "tiny.toml"
    config.write_text(
        f"[model]\npath = {str(tiny_model_dir)!r}\n"
        "[data]\ntrain = 'synthetic'\nheldout = 'synthetic'\nn_train = 8\nn_heldout = 4\nheldout_samples = 1\n"
        "[rl]\ngroup_size = 2\ngroups_per_step = 2\n"
        f"[run]\nsteps = 1\nout_dir = {str(tmp_path)!r}\nname = 'cli'\n"
        "[sandbox]\nworkers = 1\n"
    )
    code = main(["train", "--config", str(config), "--set", "sampling.max_new_tokens=6"])
    assert code == 0
    out, err = capsys.readouterr()
    summary = json.loads(out.strip().splitlines()[-1])
    # the progress line says where the step's time went, and how much memory the process holds
    assert re.search(
        r"step 1/1 .*\(generate \d+\.\d s, score \d+\.\d s, update \d+\.\d s, rss \d+\.\d GiB\)",
        err,
    )
    assert summary["steps"] == 1 and 0.0 <= summary["heldout_pass@1_after"] <= 1.0
    run = tmp_path / "cli"
    assert "max_new_tokens = 6" in (run / "config.toml").read_text()
    row = json.loads((run / "metrics.jsonl").read_text().splitlines()[0])
    assert {"reward_mean", "pass_rate", "sandbox_error_rate", "time/generate_s", "time/execute_s",
            "time/update_s", "mem/rss_gib", "mem/peak_rss_gib"} <= set(row)  # fmt: skip
    assert 0.01 < row["mem/rss_gib"] <= row["mem/peak_rss_gib"] < 64


def test_bad_config_is_a_clear_error(tmp_path, capsys, monkeypatch):
    assert main(["train", "--set", "rl.nope=1"]) == 2
    assert "unknown key rl.nope" in capsys.readouterr().err
    assert main(["train", "--set", "rl.group_size='x'"]) == 2
    assert "rl.group_size must be int" in capsys.readouterr().err
    # An unknown tracker, in the config or the environment, fails before any model is loaded.
    assert main(["train", "--set", "run.trackers='tensorbored'"]) == 2
    assert "unknown tracker 'tensorbored'" in capsys.readouterr().err
    monkeypatch.setenv("EXECRL_TRACKERS", "tensorboard,nope")
    assert main(["train"]) == 2
    assert "unknown tracker 'nope'" in capsys.readouterr().err


def test_train_on_the_embedded_default_end_to_end(tiny_default_dir, tmp_path, capsys,
                                                  monkeypatch):  # fmt: skip
    """The no-argument path (model.path = "default", signature prompts on the procedural
    suite), with a tiny default model built in a temporary cache directory."""
    monkeypatch.setenv("EXECRL_DEFAULT_MODEL_DIR", str(tiny_default_dir))
    small = ["data.n_train=4", "data.n_heldout=2", "data.heldout_samples=2", "run.steps=1",
             "rl.group_size=2", "rl.groups_per_step=2", "sampling.max_new_tokens=8",
             "sandbox.workers=1", f"run.out_dir={str(tmp_path)!r}", "run.name='d'"]  # fmt: skip
    assert main(["train", *sum((["--set", s] for s in small), [])]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert {"heldout_pass@1_before", "heldout_pass@1_after", "steps", "seconds", "run_dir"} <= set(
        summary
    )
    saved = json.loads((tmp_path / "d" / "summary.json").read_text())
    assert saved["run_dir"] == summary["run_dir"] and saved["steps"] == 1
