"""`execrl train` drives the telemetry: TensorBoard events, example completions and the report
are in the run directory at the end of a one-step run on a tiny random model."""

import json
import re

import pytest

from execrl.cli import main
from execrl.cli.train_command import train_with_telemetry
from execrl.models.loading.tiny import (
    TinyLlamaShape,
    new_llama,
    save_pretrained,
    train_bpe_tokenizer,
)
from execrl.report import examples as ex
from rl.conftest import CORPUS, LetterE, tasks, tiny_config


@pytest.mark.slow  # a whole (one-step) run: model, sandbox, update, report
def test_a_run_ends_with_its_report(tmp_path, monkeypatch):
    monkeypatch.delenv("EXECRL_TRACKERS", raising=False)
    tokenizer = train_bpe_tokenizer(CORPUS, vocab_size=300)
    shape = TinyLlamaShape(
        hidden=32, layers=2, heads=2, kv_heads=1, intermediate=64, max_positions=128
    )
    model = save_pretrained(new_llama(tokenizer, shape, seed=0), tokenizer, tmp_path / "m")
    config = tiny_config(
        model, tmp_path, "run.steps=1", "rl.groups_per_step=2", "rl.dynamic_sampling=false"
    )
    train_with_telemetry(config, tasks=tasks(), heldout=[], reward=LetterE(), quiet=True)
    run = tmp_path / "run"
    assert list((run / "tensorboard").glob("events.out.tfevents.*"))
    logged = ex.read(run / "examples.jsonl")
    # 2 groups of 4: the 2 best and the 2 worst of the step, with the reward's score
    assert [e.step for e in logged] == [0] * 4
    assert logged[0].score >= logged[-1].score and logged[0].task.startswith("t")
    assert sorted(p.name for p in (run / "report").glob("*.png")) == [
        "flags.png", "kl.png", "pass_rate.png", "reward.png", "reward_components.png",
        "verdicts.png",
    ]  # fmt: skip
    page = (run / "report.html").read_text()
    assert (
        "steps logged: 1;" in page and json.loads((run / "summary.json").read_text())["steps"] == 1
    )


def _summary_cells(page: str) -> dict[str, str]:
    """The report's summary table, name -> shown value."""
    table = page.split("<h2>Summary</h2>", 1)[1].split("</table>", 1)[0]
    return dict(re.findall(r"<tr><td>([^<]*)</td><td>([^<]*)</td></tr>", table))


@pytest.mark.slow  # two one-step runs through `execrl train`
def test_the_report_shows_the_final_figures_of_a_finished_and_a_resumed_run(
    tiny_model_dir, tmp_path, capsys, monkeypatch
):
    """report.html is written after summary.json: a finished run's report holds its held-out
    pass@1 after training, and a resumed run's report the resumed run's figures (not those of
    the run it continued)."""
    monkeypatch.delenv("EXECRL_TRACKERS", raising=False)
    tiny = [f"model.path={str(tiny_model_dir)!r}", f"run.out_dir={str(tmp_path)!r}",
            "run.name='r'", "run.steps=1", "run.trackers='none'", "data.n_train=8",
            "data.n_heldout=2", "rl.group_size=2", "rl.groups_per_step=2",
            "sampling.max_new_tokens=6", "sandbox.workers=1"]  # fmt: skip
    run = tmp_path / "r"
    for argv, steps in ((sum((["--set", s] for s in tiny), []), "1"),
                        (["--resume", str(run), "--set", "run.steps=2"], "2")):  # fmt: skip
        assert main(["train", *argv]) == 0
        summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        page = (run / "report.html").read_text()
        assert "has not finished" not in page
        shown = _summary_cells(page)
        assert shown["steps"] == steps == str(summary["steps"])
        assert float(shown["heldout_pass@1_after"]) == pytest.approx(
            summary["heldout_pass@1_after"], abs=1e-4
        )
        assert shown["seconds"] == format(summary["seconds"], ".4g")
