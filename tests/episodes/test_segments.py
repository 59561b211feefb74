"""Training on a harness's rewritten history: an episode of several token-exact segments is
learnt segment by segment, every segment's policy tokens with the episode's advantage, and the
loss's denominator counts them; with a per-token algorithm it is masked instead."""

from __future__ import annotations

import sys

import pytest
import torch

from execrl.rl.config.config import ConfigError, load_config
from execrl.rl.episodes.harness import run_harness_episodes
from execrl.rl.rollout.episode_sources import episode_scored
from execrl.rl.rollout.groups import GroupSummary

from .conftest import LOGPROB, PARAMS, ScriptedPolicy
from .test_environments import ADD, RIGHT, WRONG
from .test_harness import harness
from .test_training import builder_for

HARNESS = f"env.harness='{sys.executable} agent.py'"  # a program on PATH: the config checks


def rewritten_group(scorer, tokenizer):
    """Two episodes of one task, each rewriting its history (two segments): the first answers
    WRONG then RIGHT (passes), the second WRONG twice (fails)."""
    policy = ScriptedPolicy(tokenizer, [WRONG, RIGHT, WRONG, WRONG])
    config = harness("--rewrite", harness_parallel=1)  # one at a time: the script in order
    episodes = run_harness_episodes([ADD, ADD], policy, tokenizer, PARAMS, scorer, config,
                                    segments=True)  # fmt: skip
    return policy, [episode_scored(0, ADD, e, 1.0, scorer) for e in episodes]


def test_every_segment_is_learnt_with_its_episodes_advantage(scorer, tokenizer):
    policy, group = rewritten_group(scorer, tokenizer)
    assert [s.score for s in group] == [1.0, 0.0] and all(len(s.segments) == 1 for s in group)
    lr = builder_for("grpo", "env.name='harness'", HARNESS, "rl.micro_batch_size=8")
    built = lr.build([group])
    own, segments = built.batches
    assert built.segment_rows == 2
    # GRPO over the group of two: +1 and -1 (scores 1, 0; mean 0.5, std 0.707 -> +-0.707)
    episode_adv = [float(own.advantages[i][own.mask[i] == 1][0]) for i in range(2)]
    assert episode_adv[0] == pytest.approx(0.7071, abs=1e-3) and episode_adv[1] == -episode_adv[0]
    wrong = len(policy.ids(WRONG))
    for i in range(2):
        row_mask = segments.mask[i]
        # each segment is its first call's answer: WRONG's tokens, after a prompt of mask 0
        assert int(row_mask.sum()) == wrong
        assert torch.equal(segments.advantages[i][row_mask == 1],
                           torch.full((wrong,), episode_adv[i]))  # fmt: skip
        assert (segments.advantages[i][row_mask == 0] == 0).all()
        assert torch.equal(segments.old_logp[i][row_mask == 1], torch.full((wrong,), LOGPROB))
    # the loss's denominator counts the segments: their tokens, or one sequence each
    summary = GroupSummary.of(group)
    own_tokens = sum(int(s.turns.policy_mask.sum()) for s in group)
    assert summary.loss_weight(True, False) == own_tokens + 2 * wrong
    assert summary.loss_weight(False, False) == 4


def test_a_segment_moves_the_policy_only_through_its_own_tokens(scorer, tokenizer):
    """The segment batch's loss has a gradient on the segment's policy tokens and none on its
    prompt (the harness's text)."""
    from execrl.rl.objective.kl import ESTIMATORS
    from execrl.rl.objective.losses import LossSettings, policy_loss, token_mean

    _, group = rewritten_group(scorer, tokenizer)
    lr = builder_for("grpo", "env.name='harness'", HARNESS, "rl.micro_batch_size=8")
    _, segments = lr.build([group]).batches
    settings = LossSettings(0.2, 0.28, kl_coef=0.0, entropy_coef=0.0, vf_coef=0.0,
                            value_clip=0.2, tis_cap=2.0)  # fmt: skip
    logp = segments.old_logp.clone().requires_grad_(True)
    policy_loss(segments, logp, torch.zeros_like(logp), None, ESTIMATORS["k3"], token_mean, 10.0,
                settings).total.backward()  # fmt: skip
    assert (logp.grad[segments.mask == 1] != 0).all()
    assert (logp.grad[segments.mask == 0] == 0).all()


@pytest.mark.parametrize(
    "extra,training",
    [
        ((), "every"),
        (("rl.algorithm='rloo'",), "every"),
        (("rl.algorithm='ppo'",), "last"),
        (("rl.algorithm='reinforce_pp'", "rl.kl_in='reward'"), "last"),
        (("credit.segments='last'",), "last"),
        (("env.max_turns=2", "credit.from_turn=2"), "mask"),
    ],
)
def test_what_training_makes_of_a_rewritten_history(extra, training):
    config = load_config(None, ["env.name='harness'", HARNESS, *extra])
    assert config.segment_training == training


@pytest.mark.parametrize(
    "extra,error",
    [
        (("credit.segments='every'", "rl.algorithm='ppo'"), "does not have"),
        (("credit.segments='last'", "env.max_turns=2", "credit.from_turn=2"), "numbered"),
        (("credit.segments='first'",), "choose one of auto, every, last"),
    ],
)
def test_a_credit_segments_that_cannot_work_is_refused_when_the_config_loads(extra, error):
    with pytest.raises(ConfigError, match=error):
        load_config(None, ["env.name='harness'", HARNESS, *extra])
