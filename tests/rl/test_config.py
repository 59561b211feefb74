import pytest

from execrl.rl.config.config import ConfigError, load_config, to_toml
from execrl.rl.rollout.prompts import PromptSampler, informative


def test_defaults_toml_and_overrides(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("[optim]\nlr = 1e-3\n[rl]\nalgorithm = 'rloo'\n")
    c = load_config(
        path, ["optim.lr=5e-5", 'sampling.stop=["\\n\\n"]', "rl.dynamic_sampling=false"]
    )
    assert c.optim.lr == 5e-5 and c.rl.algorithm == "rloo" and c.sampling.stop == ["\n\n"]
    assert c.rl.dynamic_sampling is False
    again = tmp_path / "again.toml"
    again.write_text(to_toml(c))
    assert load_config(again) == c  # the saved resolved config round-trips


@pytest.mark.parametrize(
    "override, message",
    [("rl.algorithm='sac'", "choose one of"), ("nope.x=1", "unknown section"),
     ("rl.group_size=1", "at least 2"), ("optim.lr='fast'", "must be float"), ("lr=1", "section.field")],
)  # fmt: skip
def test_bad_values_name_the_key(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, [override])


def test_pass_rate_sampler_prefers_tasks_near_target():
    s = PromptSampler(3, seed=0)
    s.update(0, 1.0)  # solved: weight floored at 0.05
    s.update(1, 0.5)  # at the target: weight 1
    assert s.weight(0) == 0.05 and s.weight(1) == 1.0 and s.weight(2) == 1.0
    draws = [s.draw(1)[0] for _ in range(300)]
    assert draws.count(0) < draws.count(1) / 5
    s.update(1, 0.0)  # running average: 0.5 * 0.5 + 0.5 * 0.0 = 0.25
    assert s.pass_rate[1] == 0.25


def test_empty_task_set_is_an_error():
    with pytest.raises(ValueError, match="empty"):
        PromptSampler(0, seed=0)


def test_dynamic_sampling_filter():
    assert not informative([1.0, 1.0], [True, True])
    assert informative([1.0, 0.0], [True, True])
    assert not informative([1.0, 0.0], [True, False])  # the masked sample does not count


def test_a_group_of_one_with_dynamic_sampling_is_refused_before_it_trains_nothing():
    # DAPO's filter keeps a group only when its rewards differ: a group of one never does, so
    # PPO or REINFORCE++ at rl.group_size = 1 would drop every group and never update
    with pytest.raises(ConfigError, match="dynamic_sampling"):
        load_config(None, ["rl.algorithm='ppo'", "rl.group_size=1"])
    assert load_config(None, ["rl.algorithm='ppo'", "rl.group_size=1", "rl.dynamic_sampling=false"])
