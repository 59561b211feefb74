"""benchmarks/qwen_code_rl.py's bookkeeping: which tasks a seed gained and lost, and its table
row, from hand-made records (the study itself needs the real model and hours)."""

from __future__ import annotations

from script_helpers import load_script


def _script():
    return load_script("qwen_code_rl")


def _eval(base: float, plus: float, minutes: float) -> dict:
    return {"base": base, "plus": plus, "phase": {"minutes": minutes}}


def test_flips_name_the_tasks_gained_and_lost():
    flips = _script()._flips(
        {"a": True, "b": False, "c": False}, {"a": False, "b": True, "c": False}
    )
    assert flips == {"gained": ["b"], "lost": ["a"]}


def test_the_table_has_the_base_model_then_each_seed_with_its_minutes_and_load():
    study = {
        "before": {"humaneval+": _eval(0.5, 0.4, 20), "mbpp+": _eval(0.6, 0.5, 10)},
        "seeds": {"0": {"after": {"humaneval+": _eval(0.55, 0.45, 20), "mbpp+": _eval(0.6, 0.6, 9)},
                        "train": {"phase": {"minutes": 61.0, "load_before": 1.5,
                                            "load_after": 2.5}}}},
    }  # fmt: skip
    lines = _script()._table(study).splitlines()
    assert lines[2] == "| before (base model) | 50.0 | 40.0 | 60.0 | 50.0 | 45.0 | - | 30 | - |"
    assert lines[3] == "| seed 0 | 55.0 | 45.0 | 60.0 | 60.0 | 52.5 | 61 | 29 | 1.5-2.5 |"
