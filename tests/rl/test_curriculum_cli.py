"""End-to-end: `execrl train` on a weighted mix of task sources with a difficulty curriculum,
per-source metrics in metrics.jsonl, and a resumed curriculum run equal to an unbroken one."""

from __future__ import annotations

import json
from pathlib import Path

from execrl.cli import main
from execrl.rl.metrics import of_the_run

EASY, HARD = "synthetic:difficulty=1,n=6", "synthetic:difficulty=3,n=6"


def _sets(*pairs: str) -> list[str]:
    return [arg for pair in pairs for arg in ("--set", pair)]


def _small(model_dir: Path, out_dir: Path, name: str) -> list[str]:
    return _sets(f"model.path={str(model_dir)!r}", f"run.out_dir={str(out_dir)!r}",
                 f"run.name={name!r}", "data.heldout=''", "rl.group_size=2",
                 "rl.groups_per_step=2", "rl.dynamic_sampling=false",
                 "sampling.max_new_tokens=6", "sandbox.workers=1")  # fmt: skip


def _rows(run_dir: Path) -> list[dict]:
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [of_the_run(r) for r in rows]


def test_a_weighted_mix_logs_each_source_and_a_schedule_opens_levels_on_time(
    tiny_model_dir, tmp_path, capsys
):
    config = tmp_path / "mix.toml"
    config.write_text(
        f'[data]\ntrain = ["{EASY}", "{HARD}"]\nweights = [1, 3]\n'
        "curriculum = 'schedule'\ncurriculum_opens = [0.0, 0.5]\n[run]\nsteps = 4\n"
    )
    args = ["train", "--config", str(config), *_small(tiny_model_dir, tmp_path, "mix")]
    assert main(args) == 0
    rows = _rows(tmp_path / "mix")
    # levels 1 and 3 present; level 3 opens at half of the 4 steps: step 2
    assert [r["curriculum/level"] for r in rows] == [1, 1, 3, 3]
    # before it opens, every group is the easy source's, whatever its larger weight
    for r in rows[:2]:
        assert r[f"source/{EASY}/groups"] == 2 and r[f"source/{HARD}/groups"] == 0
        assert r[f"source/{HARD}/pass_rate"] is None and r[f"source/{HARD}/reward"] is None
        assert r[f"source/{EASY}/pass_rate"] == r["pass_rate"]
        assert r[f"source/{EASY}/reward"] == r["reward_mean"]
    # after it, the hard source (weight 3 of 4) is drawn
    assert sum(r[f"source/{HARD}/groups"] for r in rows[2:]) >= 2
    for r in rows[2:]:
        assert r[f"source/{EASY}/groups"] + r[f"source/{HARD}/groups"] == 2
    saved = (tmp_path / "mix" / "config.toml").read_text()
    assert f'train = ["{EASY}", "{HARD}"]' in saved and "weights = [1.0, 3.0]" in saved


def test_a_schedule_opens_levels_at_the_same_steps_when_rollouts_run_ahead(
    tiny_model_dir, tmp_path
):
    # rl.max_staleness = 1: a thread draws step s + 1 while step s updates; the sampler counts
    # steps by its draws, not by the loop, so the schedule is the synchronous run's
    mix = _sets(f'data.train=["{EASY}", "{HARD}"]', "data.weights=[1, 3]",
                "data.curriculum='schedule'", "data.curriculum_opens=[0.0, 0.5]", "run.steps=4",
                "rl.max_staleness=1")  # fmt: skip
    assert main(["train", *_small(tiny_model_dir, tmp_path, "ahead"), *mix]) == 0
    rows = _rows(tmp_path / "ahead")
    assert [r["curriculum/level"] for r in rows] == [1, 1, 3, 3]
    assert [r[f"source/{HARD}/groups"] for r in rows[:2]] == [0, 0]
    assert rows[-1]["async/staleness"] == 1


def test_a_pass_rate_curriculum_moves_on_and_a_resumed_run_equals_an_unbroken_one(
    tiny_model_dir, tmp_path, capsys
):
    # target 0 with a window of one group: a level is mastered once one of its groups ran,
    # so the work moves to the next level present every step that drew the current one
    curriculum = _sets("data.train='synthetic:difficulty=mixed,n=30'",
                       "data.curriculum='pass_rate'", "data.curriculum_target=0.0",
                       "data.curriculum_window=1")  # fmt: skip
    straight = _small(tiny_model_dir, tmp_path, "a")
    assert main(["train", *straight, *curriculum, "--set", "run.steps=4"]) == 0
    rows = _rows(tmp_path / "a")
    levels = [r["curriculum/level"] for r in rows]
    assert levels[:2] == [1, 2] and levels == sorted(levels), levels
    assert rows[1]["curriculum/level1_pass_rate"] is not None
    stopped = _small(tiny_model_dir, tmp_path, "b")
    assert main(["train", *stopped, *curriculum, "--set", "run.steps=2"]) == 0
    assert main(["train", "--resume", str(tmp_path / "b"), "--set", "run.steps=4"]) == 0
    assert _rows(tmp_path / "b") == rows


def test_mix_and_curriculum_mistakes_fail_before_any_model_loads(tmp_path, capsys):
    nowhere = _sets(f"model.path={str(tmp_path / 'no-model')!r}", f"run.out_dir={str(tmp_path)!r}")
    # one level present (difficulty 1), two opening times
    bad_opens = _sets(f"data.train='{EASY}'", "data.curriculum='schedule'",
                      "data.curriculum_opens=[0, 0.5]")  # fmt: skip
    assert main(["train", *nowhere, *bad_opens]) == 2
    err = capsys.readouterr().err
    assert "data.curriculum_opens has 2 entries" in err and "1 difficulty levels (1)" in err
    bad_weights = _sets(f'data.train=["{EASY}", "{HARD}"]', "data.weights=[1]")
    assert main(["train", *nowhere, *bad_weights]) == 2
    assert "data.weights has 1 entries for 2 sources" in capsys.readouterr().err
    assert main(["train", *nowhere, *_sets("data.curriculum='hardest_first'")]) == 2
    assert "data.curriculum = 'hardest_first'; choose one of" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # no run directory was made


def test_each_source_logs_its_kl_and_they_average_to_the_steps(tiny_model_dir, tmp_path):
    config = tmp_path / "kl.toml"
    config.write_text(f'[data]\ntrain = ["{EASY}", "{HARD}"]\n[run]\nsteps = 2\n'
                      "[rl]\nkl_coef = 0.1\nentropy_coef = 0.5\n[optim]\nlr = 0.05\n")  # fmt: skip
    args = ["train", "--config", str(config), *_small(tiny_model_dir, tmp_path, "kl")]
    assert main(args) == 0
    rows = _rows(tmp_path / "kl")
    last = rows[-1]  # the entropy bonus moved the policy off the reference: KL > 0
    kls = [last[f"source/{name}/kl"] for name in (EASY, HARD)]
    assert any(k is not None and k > 0 for k in kls)
    assert all(k is None or k >= 0 for k in kls)
    # the step's KL is the token-weighted mean of the sources'
    assert min(k for k in kls if k is not None) <= last["kl"] + 1e-6
    assert last["kl"] <= max(k for k in kls if k is not None) + 1e-6
