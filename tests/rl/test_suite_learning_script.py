"""benchmarks/suite_learning.py's bookkeeping: the held-out figures it reads from an evaluation's
summary (a verifier suite's score, coder_tester's roles) and its table, from hand-made records
(the study itself needs the real model)."""

from __future__ import annotations

from script_helpers import load_script


def _script():
    return load_script("suite_learning")


def test_a_verifier_suite_is_judged_by_its_mean_score_beside_pass_at_1():
    figures = _script()._figures({"pass@1": 0.25, "verifier_score": 0.4})
    assert figures == {"score": 0.4, "pass": 0.25}


def test_coder_tester_is_judged_by_the_coder_s_last_attempt_and_names_the_tester():
    roles = {"coder": {"pass@1_by_turn": [0.5, 0.625]},
             "tester": {"reward_mean": 0.3, "components": {"kill_rate": 0.5}}}  # fmt: skip
    figures = _script()._figures({"pass@1": 0.625, "roles": roles})
    assert figures["score"] == 0.625 and figures["coder_first"] == 0.5
    assert figures["tester_reward"] == 0.3 and figures["tester_components"] == {"kill_rate": 0.5}


def test_the_table_has_a_row_a_seed_and_the_mean_gain_over_several():
    phase = {"minutes": 15.0, "load_before": 1.9, "load_after": 2.4}
    seeds = {str(s): {"train": {"phase": phase},
                      "after": {"score": after, "pass": 0.0, "phase": {"minutes": 1.0}}}
             for s, after in enumerate([0.25, 0.35])}  # fmt: skip
    study = {"suites": {"diagram": {"before": {"score": 0.05, "pass": 0.0}, "seeds": seeds}}}
    table = _script()._table(study)
    rows = [line for line in table.splitlines() if line.startswith("| diagram")]
    assert len(rows) == 3
    assert "| 0 | 0.050 | 0.250 |" in rows[0] and "| 15 | 1 | 1.9-2.4 |" in rows[0]
    assert "+0.250 (spread 0.100)" in rows[2]
