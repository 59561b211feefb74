"""[credit]: its fields, and the old [env] names that still load with a deprecation message."""

from __future__ import annotations

import pytest

from execrl.rl.config.config import ConfigError, load_config, resume_config, to_toml
from execrl.rl.config.credit_config import MOVED_TO_CREDIT, CreditConfig

OLD = """
[env]
name = "self_correct"
credit_from_turn = 2
held_kl_coef = 0.5
credit_baseline = "reached"
correction_coef = 1.0
"""


def test_the_old_env_names_load_into_credit_with_one_message_each(tmp_path, capsys):
    path = tmp_path / "old.toml"
    path.write_text(OLD)
    config = load_config(path, ["env.segments='auto'"])
    assert config.credit == CreditConfig(
        from_turn=2, held_kl_coef=0.5, baseline="reached", correction_coef=1.0, segments="auto"
    )
    assert config.uses_reference and config.segment_training == "mask"
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"execrl: {path} with --set: env.{old} is deprecated; it is credit.{new} now "
        "([credit], "
        "docs/episodes.md)"
        for old, new in MOVED_TO_CREDIT.items()
    ]
    saved = to_toml(config)  # what a run directory keeps: the new names only
    assert "[credit]\nfrom_turn = 2\n" in saved and "credit_from_turn" not in saved


def test_one_setting_under_both_names_is_refused(capsys):
    with pytest.raises(ConfigError, match="env.held_kl_coef and credit.held_kl_coef are the same"):
        load_config(None, ["env.name='self_correct'", "credit.from_turn=2",
                           "credit.held_kl_coef=1.0", "env.held_kl_coef=0.5"])  # fmt: skip


def test_a_run_directory_saved_before_credit_resumes_without_a_message(tmp_path, capsys):
    config = load_config(None, ["env.name='self_correct'", "credit.from_turn=2"])
    old = to_toml(config).replace("[credit]\n", "").replace("from_turn", "credit_from_turn")
    old = old.replace("baseline = ", "credit_baseline = ")  # [credit]'s lines now fall in [env]
    assert "[env]" in old and old.index("credit_from_turn") > old.index("[env]")
    (tmp_path / "config.toml").write_text(old)
    resumed = resume_config(tmp_path, ["run.steps=5"])
    assert resumed.credit == config.credit and resumed.run.steps == 5
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    "extra,message",
    [
        (["credit.from_turn=0"], "credit.from_turn must be >= 1"),
        (["env.name='self_correct'", "credit.from_turn=3"], r"in 1..env.max_turns \(2\), got 3"),
        (["credit.correction_coef=1.0"], 'needs env.name = "self_correct"'),
        (["credit.baseline='best'"], "credit.baseline 'best': choose one of group, reached"),
        (["credit.from_turn=2", "credit.held_kl_coef=-1"], "held_kl_coef = -1.0: it must be >= 0"),
    ],
)
def test_a_credit_setting_that_cannot_work_names_its_field(extra, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, extra)
