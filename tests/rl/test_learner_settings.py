"""LearnerSettings: what the update reads of a run's config, resolved once at set-up."""

from __future__ import annotations

from execrl.rl.config.config import load_config
from execrl.rl.objective.algorithms import DR_GRPO
from execrl.rl.update.learner_settings import LearnerSettings


def test_the_settings_resolve_what_the_config_leaves_open():
    settings = LearnerSettings.of(load_config(None, [
        "rl.algorithm='dr_grpo'", "rl.kl_coef=0.1", "rl.kl_in='reward'", "rl.max_staleness=1",
    ]))  # fmt: skip
    assert settings.algorithm is DR_GRPO and settings.algorithm_spec == "dr_grpo"
    assert settings.loss_agg == "seq_mean_constant"  # "auto": the record's aggregation
    assert settings.loss.kl_coef == 0.0 and settings.kl_in_reward and settings.kl_coef == 0.1
    assert settings.kl_estimator == "k3" and settings.recompute_old  # a stale behaviour policy
    plain = LearnerSettings.of(load_config(None, ["rl.loss_agg='seq_mean'"]))
    assert plain.loss_agg == "seq_mean" and plain.kl_estimator is None  # no reference model
    assert plain.loss.kl_coef == 0.0 and not plain.recompute_old
    # held turns' KL loads the reference model even with rl.kl_coef = 0
    held = LearnerSettings.of(load_config(None, [
        "env.name='self_correct'", "credit.from_turn=2", "credit.held_kl_coef=0.5",
    ]))  # fmt: skip
    assert held.kl_estimator == "k3" and held.credit.held_kl_coef == 0.5
