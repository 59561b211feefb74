"""`eval.config.EvalConfig`, the record of one evaluation: a flag that cannot work is an error
naming it and what to give, met through `execrl eval` before anything past the record runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from execrl.cli import main
from execrl.eval import run as run_module
from execrl.eval.config import EvalConfig, EvalConfigError


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--threads", "-1"], "--threads -1: give 0 (chosen at start) or a positive count"),
        (["-k", "1,x"], "-k '1,x': give comma-separated integers, e.g. -k 1,10"),
        (["--repeat-ngram", "-2"], "--repeat-ngram -2: give 0 (off) or a token count"),
        (["--corrections"], "--corrections needs episodes with feedback: add --env self_correct"),
        (["--env", "self_correct", "--prompt", "evalplus"],
         "--prompt evalplus with --env self_correct: episodes prompt as training does"),
    ],
)  # fmt: skip
def test_a_bad_flag_is_named_before_anything_runs(capsys, monkeypatch, flags, says):
    def reached(model: str) -> None:
        raise AssertionError(f"the run began with {model}")

    monkeypatch.setattr(run_module, "require_fetched", reached)
    assert main(["eval", "--model", "nosuch-org/nosuch-model", *flags]) == 2
    assert capsys.readouterr().err == f"execrl eval: error: {says}\n"


def test_the_record_fills_what_depends_on_other_fields():
    assert EvalConfig("m").batch_size == 16 and EvalConfig("m", engine="vllm").batch_size == 64
    assert EvalConfig("m", k="10, 1,1").ks == (1, 10)
    assert EvalConfig("m", env="self_correct", k="x").ks == ()  # episodes print pass@1 by turn
    with pytest.raises(EvalConfigError, match=r"^--top-p 2\.0: it must be in \(0, 1\]$"):
        EvalConfig("m", top_p=2.0)


def test_the_output_directory_is_named_by_what_was_evaluated():
    assert EvalConfig("org/model").out_dir_for("humaneval", "org/model") == Path(
        "evals/humaneval__org_model"
    )
    assert EvalConfig("m", out_dir=Path("here")).out_dir_for("humaneval", "m") == Path("here")
