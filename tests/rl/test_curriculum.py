"""Task mixes and curricula, by hand: the difficulty scale, the sampler's source shares and open
levels, its state across a resume, unique ids across sources, per-source metrics, config errors."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from execrl.rl.config.config import ConfigError, load_config
from execrl.rl.config.curriculum import Curriculum, TaskMix
from execrl.rl.metrics import mix_metrics
from execrl.rl.rollout.groups import GroupSummary
from execrl.rl.rollout.prompts import PromptSampler
from execrl.rl.setup import load_mix, source_names
from execrl.tasks.difficulty import difficulty_level


@pytest.mark.parametrize(
    ("value", "level"),
    [(None, 0), ("", 0), ("UNKNOWN_DIFFICULTY", 0), (0, 0), (6, 0),  # CodeContests 6: EXTERNAL
     (1, 1), (5, 5), ("easy", 1), ("introductory", 1), ("interview", 2), ("MEDIUM", 2),
     ("competition", 3), ("hard", 3), ("MEDIUM_HARD", 3), ("VERY_HARD", 4), ("hardest", 5),
     (7, 1), ("7", 1), (10, 4), (11, 5), (20, 5)],  # Codeforces letters: A=7 -> 1 .. E=11 -> 5
)  # fmt: skip
def test_every_datasets_difficulty_lands_on_one_scale(value, level):
    assert difficulty_level(value) == level


@pytest.mark.parametrize("value", ["expert", -1, True, 2.5])
def test_a_difficulty_off_the_scale_is_an_error_not_level_zero(value):
    with pytest.raises(ValueError, match="difficulty"):
        difficulty_level(value)


def _mix(levels_by_source: list[list[int]], weights: list[float]) -> TaskMix:
    source_of = tuple(s for s, levels in enumerate(levels_by_source) for _ in levels)
    level_of = tuple(x for levels in levels_by_source for x in levels)
    names = tuple(f"s{i}" for i in range(len(levels_by_source)))
    return TaskMix(names, tuple(weights), source_of, level_of)


def _draw_as_before_mixes(sampler: PromptSampler, k: int, exclude: list[int]) -> list[int]:
    """The sampler's draw as it was before task mixes (commit f629301), on its own RNG."""
    pool = [i for i in range(sampler.n_tasks) if i not in set(exclude)]
    chosen: list[int] = []
    weights = [sampler.weight(i) for i in pool]
    for _ in range(min(k, len(pool))):
        j = sampler.rng.choices(range(len(pool)), weights=weights)[0]
        chosen.append(pool.pop(j))
        weights.pop(j)
    return chosen


def test_one_source_without_a_curriculum_draws_exactly_as_before_mixes():
    before, now = PromptSampler(10, seed=3), PromptSampler(10, seed=3, mix=TaskMix.single(10))
    for step in range(20):
        first = _draw_as_before_mixes(before, 4, [])
        assert now.draw(4) == first
        assert now.draw(3, exclude=first) == _draw_as_before_mixes(before, 3, first)
        for task in first:
            before.update(task, step % 3 / 2)
            now.update(task, step % 3 / 2)


def test_each_source_gets_its_weights_share_whatever_its_tasks_pass_rates():
    # 2 tasks in source 0, 8 in source 1, weights 1 : 3. Source 1's tasks are all solved (pass
    # rate 1: weight floored to 0.05), yet it keeps 3/4 of the draws.
    mix = _mix([[0, 0], [0] * 8], [1, 3])
    sampler = PromptSampler(10, seed=0, mix=mix)
    for task in range(2, 10):
        sampler.update(task, 1.0)
    drawn = Counter(mix.source_of[sampler.draw(1)[0]] for _ in range(4000))
    assert abs(drawn[1] / 4000 - 0.75) < 0.03, drawn
    # without replacement: a draw of all ten returns each task once
    assert sorted(sampler.draw(10)) == list(range(10))


def test_a_schedule_opens_each_level_at_its_fraction_of_the_run():
    # levels 1, 2, 3 over 10 steps, evenly spaced: level 2 at step 10/3 -> 4, level 3 at 7
    curriculum = Curriculum("schedule", (1, 2, 3), total_steps=10)
    assert curriculum.opens == (0.0, 1 / 3, 2 / 3)
    assert [curriculum.open_level(s) for s in range(10)] == [1, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    mix = _mix([[1, 1, 2, 3, 0]], [1])  # task 4 has no difficulty: always open
    sampler = PromptSampler(5, seed=0, mode="uniform", mix=mix, curriculum=curriculum)
    for step in range(10):
        expected = {0, 1, 4} | ({2} if step >= 4 else set()) | ({3} if step >= 7 else set())
        drawn = sampler.draw(len(expected))
        assert sampler.steps == step + 1
        assert set(drawn) == expected, (step, drawn)
        # a refill round is the same step; what the open levels lack, the next level fills
        assert sampler.draw(1, exclude=drawn) == ([2] if step < 4 else [3] if step < 7 else [])
        assert sampler.steps == step + 1


def test_a_step_the_open_levels_cannot_fill_takes_the_next_level_easiest_first():
    # open: level 1 (tasks 0, 1); closed: level 2 (task 2), level 3 (tasks 3, 4)
    curriculum = Curriculum("schedule", (1, 2, 3), total_steps=3, opens=(0.0, 0.9, 0.95))
    sampler = PromptSampler(5, seed=1, mix=_mix([[1, 1, 3, 2, 3]], [1]), curriculum=curriculum)
    drawn = sampler.draw(4)
    assert set(drawn[:2]) == {0, 1} and drawn[2] == 3 and drawn[3] in (2, 4)
    assert sampler.open_level == 1


def test_a_pass_rate_curriculum_opens_the_next_level_once_a_full_window_reaches_the_target():
    mix = _mix([[1, 1, 2, 2, 3]], [1])
    curriculum = Curriculum("pass_rate", (1, 2, 3), total_steps=100, target=0.5, window=2)
    sampler = PromptSampler(5, seed=0, mix=mix, curriculum=curriculum)
    assert sampler.draw(5) and sampler.open_level == 1  # nothing seen: the easiest level
    sampler.update(0, 1.0)  # one group at 1.0: the window of 2 is not full yet
    sampler.draw(5)
    assert sampler.open_level == 1
    sampler.update(1, 0.0)  # window (1.0, 0.0): mean 0.5 reaches the target
    assert set(sampler.draw(4)) == {0, 1, 2, 3} and sampler.open_level == 2
    sampler.update(2, 1.0)
    sampler.update(3, 1.0)  # level 2 mastered too: the hardest level present opens
    sampler.draw(5)
    assert sampler.open_level == 3
    sampler.update(0, 0.0)  # level 1 forgotten: window (0.0, 0.0), back to it
    sampler.draw(5)
    assert sampler.open_level == 1 and curriculum.running_pass_rate(1) == 0.0


def test_a_restored_sampler_draws_what_the_original_would_have():
    def make() -> PromptSampler:
        curriculum = Curriculum("pass_rate", (1, 2), total_steps=50, target=0.3, window=3)
        return PromptSampler(9, seed=7, mix=_mix([[1, 1, 2, 0], [2, 2, 1, 1, 2]], [2, 1]),
                             curriculum=curriculum)  # fmt: skip

    original = make()
    for step in range(6):
        for task in original.draw(3):
            original.update(task, (task * step) % 4 / 3)
    restored = make()
    restored.load_state_dict(original.state_dict())
    assert restored.steps == original.steps == 6
    for step in range(6):
        drawn = original.draw(3)
        assert restored.draw(3) == drawn and restored.open_level == original.open_level
        for task in drawn:
            original.update(task, step / 6)
            restored.update(task, step / 6)
    # a checkpoint saved before curricula existed (no step count, no windows) still loads
    old = make()
    old.load_state_dict({"pass_rate": {"1": 0.5}, "rng": original.rng.getstate()})
    assert old.steps == 0 and old.pass_rate == {1: 0.5}


def test_task_ids_two_sources_share_get_the_source_name_as_a_prefix():
    # the same three tasks under two specs; a third source's ids are its own
    specs = ["synthetic:n=3,difficulty=1", "synthetic:n=3,difficulty=1,seed=0",
             "synthetic:n=2,difficulty=2"]  # fmt: skip
    config = load_config(None, [f"data.train={specs!r}", "data.weights=[1, 1, 2]"])
    tasks, mix = load_mix(config)
    ids = [t.id for t in tasks]
    assert len(set(ids)) == len(ids) == 8 and mix.source_of == (0, 0, 0, 1, 1, 1, 2, 2)
    assert all(i.startswith(f"{specs[0]}/synthetic/") for i in ids[:3])
    assert [i.removeprefix(f"{specs[1]}/") for i in ids[3:6]] == [
        i.removeprefix(f"{specs[0]}/") for i in ids[:3]
    ]
    assert all(i.startswith("synthetic/") for i in ids[6:]) and mix.weights == (1.0, 1.0, 2.0)


def test_source_names_cut_paths_to_file_names_unless_two_would_match():
    assert source_names(["mbpp", "jsonl:/a/b/x.jsonl", "apps:/d/apps.jsonl"]) == (
        "mbpp", "jsonl:x.jsonl", "apps:apps.jsonl")  # fmt: skip
    assert source_names(["jsonl:/a/x.jsonl", "jsonl:/b/x.jsonl"]) == (
        "jsonl:/a/x.jsonl", "jsonl:/b/x.jsonl")  # fmt: skip


def _group(task: int, scores: tuple[float, ...], passed: tuple[bool, ...]) -> GroupSummary:
    n = len(scores)
    return GroupSummary(task, scores, (True,) * n, passed, (3,) * n, (False,) * n, ("OK",) * n,
                        ((),) * n, ({},) * n, ("",) * n, ())  # fmt: skip


def test_per_source_metrics_by_hand():
    sampler = PromptSampler(3, seed=0, mix=_mix([[0, 0], [0]], [1, 1]))
    groups = [_group(0, (1.0, 0.0), (True, False)), _group(1, (0.5, 0.5), (False, False))]
    row = mix_metrics(groups, sampler)
    # s0: 4 samples, 1 passed -> 0.25; rewards (1 + 0 + 0.5 + 0.5) / 4 = 0.5. s1: not drawn.
    assert row == {
        "source/s0/groups": 2,
        "source/s0/pass_rate": 0.25,
        "source/s0/reward": 0.5,
        "source/s1/groups": 0,
        "source/s1/pass_rate": None,
        "source/s1/reward": None,
    }
    assert mix_metrics(groups, PromptSampler(3, seed=0)) == {}  # one source: the global row


@pytest.mark.parametrize(
    ("sets", "message"),
    [(["data.train=[]"], "data.train is empty"),
     (["data.train=['mbpp', 'mbpp']"], "names 'mbpp' twice"),
     (["data.train=['mbpp', 'nope']"], r"data.train\[1\] = 'nope' is not a task source"),
     (["data.weights=[1, 2]"], "data.weights has 2 entries for 1 sources"),
     (["data.train=['mbpp', 'synthetic']", "data.weights=[1, 0]"], "must be positive"),
     (["data.curriculum_opens=[0, 0.5]"], "is for data.curriculum = 'schedule'"),
     (["data.curriculum='schedule'", "data.curriculum_opens=[0.2, 0.5]"], "the first 0"),
     (["data.curriculum='schedule'", "data.curriculum_opens=[0, 0.6, 0.5]"], "non-decreasing"),
     (["data.curriculum_target=1.5"], r"data.curriculum_target must be in \[0, 1\]"),
     (["data.curriculum_window=0"], "data.curriculum_window must be at least 1")],
)  # fmt: skip
def test_mix_and_curriculum_settings_are_checked_with_the_field_named(sets, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, sets)


def test_a_curriculum_over_tasks_without_levels_says_so():
    from execrl.rl.setup import curriculum_for

    config = load_config(None, ["data.curriculum='pass_rate'"])
    with pytest.raises(ConfigError, match="no training task has a difficulty level"):
        curriculum_for(config, TaskMix.single(4, "jsonl:x.jsonl"))


def test_contest_sources_mix_with_their_own_difficulty_labels_on_one_scale():
    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "contest"
    kinds = ("apps", "taco", "codecontests", "livecodebench", "kodcode", "primeintellect")
    specs = [f"{kind}:{fixtures / kind}.jsonl" for kind in kinds]
    config = load_config(None, [f"data.train={specs!r}", "data.curriculum='schedule'"])
    tasks, mix = load_mix(config)
    labels = {(mix.names[s], t.metadata["difficulty"], level)
              for t, s, level in zip(tasks, mix.source_of, mix.level_of, strict=True)}  # fmt: skip
    assert labels == {
        ("apps:apps.jsonl", "introductory", 1), ("apps:apps.jsonl", "interview", 2),
        ("taco:taco.jsonl", "EASY", 1), ("codecontests:codecontests.jsonl", 7, 1),
        ("livecodebench:livecodebench.jsonl", "easy", 1),
        ("livecodebench:livecodebench.jsonl", "medium", 2),
        ("kodcode:kodcode.jsonl", "easy", 1), ("kodcode:kodcode.jsonl", "medium", 2),
        ("primeintellect:primeintellect.jsonl", "7", 1),
        ("primeintellect:primeintellect.jsonl", "introductory", 1),
    }  # fmt: skip
    # TACO and LiveCodeBench both have a problem "1": each keeps it under its source's name
    ids = [t.id for t in tasks]
    assert len(set(ids)) == len(ids)
    assert {"taco:taco.jsonl/1", "livecodebench:livecodebench.jsonl/1"} <= set(ids)
