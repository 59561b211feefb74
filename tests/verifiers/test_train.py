"""`execrl train` on a verifier suite through the CLI: a few steps with a tiny model that has
memorised one task's answer in a fenced block (a random tiny model writes no code at all, and
nothing would reach the verifier)."""

from __future__ import annotations

import json

import pytest
import torch

from execrl.cli import main
from execrl.models.loading.sft import SFTSettings, sft
from execrl.models.loading.tiny import (
    TinyLlamaShape,
    new_llama,
    save_pretrained,
    train_bpe_tokenizer,
)
from execrl.tasks.catalog.registry import load_benchmark

SUITE = "sql:n=1,difficulty=1"
CHART = "chart:n=1,difficulty=1"


def memorised(suite: str, directory):
    """A tiny model that answers the suite's one task with its reference in a fence."""
    (task,) = load_benchmark(suite)
    pair = (task.prompt, f"```\n{task.reference}```")
    tokenizer = train_bpe_tokenizer([pair[0] + pair[1]] * 4, vocab_size=400)
    shape = TinyLlamaShape(
        hidden=32, layers=1, heads=2, kv_heads=1, intermediate=64, max_positions=512
    )
    torch.manual_seed(0)
    model = new_llama(tokenizer, shape, seed=0)
    losses = sft(model, tokenizer, [pair], SFTSettings(steps=40, batch_size=1, lr=3e-2, warmup=3))
    assert losses[-1] < losses[0] / 4
    return save_pretrained(model, tokenizer, directory)


@pytest.fixture(scope="module")
def sql_model(tmp_path_factory):
    return memorised(SUITE, tmp_path_factory.mktemp("sqlm"))


@pytest.mark.slow  # about a minute on a loaded 2-core machine, most of it the memorising
def test_train_on_the_sql_suite_scores_with_the_verifier(sql_model, tmp_path, capsys):
    config = tmp_path / "sql.toml"
    config.write_text(
        f"[model]\npath = {str(sql_model)!r}\n"
        f"[data]\ntrain = {SUITE!r}\nheldout = ''\nn_train = 1\n"
        "[rl]\ngroup_size = 2\ngroups_per_step = 1\n"
        f"[run]\nsteps = 2\nout_dir = {str(tmp_path)!r}\nname = 'sql'\n"
        "[sandbox]\nworkers = 1\n"
        "[reward.tree]\ntype = 'verifier'\n"
    )
    code = main(["train", "--config", str(config), "--set", "sampling.max_new_tokens=40"])
    assert code == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["steps"] == 2
    rows = [json.loads(x) for x in (tmp_path / "sql" / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 2
    # The completions reached the sql verifier: scored by it, not flagged as having no code.
    assert all("reward/verifier" in r and r["flag/no_code"] < 2 for r in rows), rows
    graded = [r.get("verdict/PASSED", 0.0) + r.get("verdict/WRONG_ANSWER", 0.0) for r in rows]
    assert max(graded) > 0, rows


@pytest.mark.slow  # shares the memorising above
def test_eval_on_the_sql_suite_scores_with_the_verifier(sql_model, tmp_path, capsys):
    code = main(
        ["eval", "--model", str(sql_model), "--benchmark", SUITE, "--max-new-tokens", "40",
         "--out-dir", str(tmp_path / "eval"), "--workers", "1", "--json"]
    )  # fmt: skip
    assert code == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["n_samples"] == 1 and summary["verdicts"]["SYNTAX_ERROR"] == 0
    assert summary["verdicts"]["PASSED"] + summary["verdicts"]["WRONG_ANSWER"] == 1


@pytest.mark.slow  # about a minute: the memorising, then matplotlib runs in the sandbox
def test_train_on_the_chart_suite_shows_the_rendered_charts_in_the_report(tmp_path, capsys):
    model = memorised(CHART, tmp_path / "model")
    config = tmp_path / "chart.toml"
    config.write_text(
        f"[model]\npath = {str(model)!r}\n"
        f"[data]\ntrain = {CHART!r}\nheldout = ''\nn_train = 1\n"
        "[rl]\ngroup_size = 2\ngroups_per_step = 1\n"
        f"[run]\nsteps = 1\nout_dir = {str(tmp_path)!r}\nname = 'chart'\n"
        "[sandbox]\nworkers = 1\n[sandbox.limits]\nwall_s = 60.0\n"  # matplotlib's import, on a loaded machine
        "[reward.tree]\ntype = 'verifier'\n"
    )
    code = main(["train", "--config", str(config), "--set", "sampling.max_new_tokens=80"])
    assert code == 0
    run = tmp_path / "chart"
    row = json.loads((run / "metrics.jsonl").read_text().splitlines()[0])
    assert row["reward/verifier"] > 0, row  # a chart was drawn and compared with the reference
    images = sorted((run / "artifacts").glob("*.png"))
    names = {p.name.split("-", 1)[1] for p in images}
    assert names == {"chart.png", "reference.png"}, images
    page = (run / "report.html").read_text()
    for image in images:
        assert image.read_bytes().startswith(b"\x89PNG")
        assert f'<img src="artifacts/{image.name}"' in page
