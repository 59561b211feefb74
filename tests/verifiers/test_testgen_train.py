"""`execrl train` and `execrl eval-samples` on the `testgen` suite through the CLI. Training
uses a tiny model that has memorised one task's reference suite (the benchmark's tests) in a
fenced block; its greedy answer at evaluation is not reliably the memorised one, so the
evaluation path is shown with samples written here."""

from __future__ import annotations

import json

import pytest

from execrl.cli import main
from verifiers.test_train import memorised

SUITE = "testgen:n=1,difficulty=1"


@pytest.mark.slow  # about a minute on a loaded 2-core machine, most of it the memorising
def test_train_on_the_testgen_suite_scores_with_the_verifier(data_env, tmp_path):
    model = memorised(SUITE, tmp_path / "model")
    config = tmp_path / "testgen.toml"
    config.write_text(
        f"[model]\npath = {str(model)!r}\n"
        f"[data]\ntrain = {SUITE!r}\nheldout = ''\nn_train = 1\n"
        "[rl]\ngroup_size = 2\ngroups_per_step = 1\n"
        f"[run]\nsteps = 1\nout_dir = {str(tmp_path)!r}\nname = 'tg'\n"
        "[sandbox]\nworkers = 1\n"
        "[reward.tree]\ntype = 'verifier'\n"
    )
    code = main(["train", "--config", str(config), "--set", "sampling.max_new_tokens=160"])
    assert code == 0
    rows = [json.loads(x) for x in (tmp_path / "tg" / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 1
    # The completions reached the testgen verifier: scored by it, not flagged as having no code.
    assert "reward/verifier" in rows[0] and rows[0]["flag/no_code"] < 2, rows


def test_eval_samples_grades_suites_with_the_testgen_verifier(data_env, tmp_path, capsys):
    from execrl.tasks.catalog.registry import load_benchmark

    (task,) = load_benchmark(SUITE)
    samples = tmp_path / "samples.jsonl"
    rows = [{"task_id": task.id, "solution": s} for s in (task.reference, task.tests.wrong)]
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code = main(["eval-samples", str(samples), "--benchmark", SUITE, "--json"])
    assert code == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    # the benchmark's own tests pass (every wrong program caught), the hack does not
    assert summary["verdicts"]["PASSED"] == 1 and summary["verdicts"]["WRONG_ANSWER"] == 1
