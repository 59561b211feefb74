"""Correction samples (credit.correction_coef, CIPO): built by hand from a scripted group, their
exact token ids and mask; the learner's correction batch (fixed advantage on the answer only,
the policy's own old log-probs); and an update on it makes the passing answer likelier after
the failed attempt's feedback."""

from __future__ import annotations

import pytest
import torch

from execrl.models.loading.tiny import TinyLlamaShape, new_llama
from execrl.rl.config.config import ConfigError, load_config
from execrl.rl.episodes import EnvConfig
from execrl.rl.objective.logprobs import collate, token_stats
from execrl.rl.rollout.episode_sources import episode_scored
from execrl.rl.update.batch_builder import BatchBuilder
from execrl.rl.update.batch_rows import model_terms
from execrl.rl.update.corrections import correction_samples
from execrl.rl.update.learner_settings import LearnerSettings
from execrl.rl.update.trainer import Learner

from .conftest import play
from .test_environments import ADD, RIGHT
from .test_training import fixed_then_failed, layout


def group_of_three(scorer, tokenizer):
    """Right at once; fixed at turn 2 (WRONG, RIGHT); failed twice (WRONG, WRONG)."""
    _, at_once = play(scorer, tokenizer, EnvConfig("self_correct", max_turns=2), [RIGHT], ADD)
    policy, (fixed, failed) = fixed_then_failed(scorer, tokenizer)
    return policy, [episode_scored(0, ADD, at_once, 1.0, scorer), fixed, failed]


def test_each_failed_first_attempt_gets_another_episodes_passing_answer(scorer, tokenizer):
    policy, group = group_of_three(scorer, tokenizer)
    ids, _, n_wrong, n_env = layout(policy, tokenizer)
    context, right = ids[: n_wrong + n_env], policy.ids(RIGHT)
    made = correction_samples(group)
    # the episode right at once has no failed attempt; the fixed one is paired with the answer
    # of the one right at once (never its own), the failed one with the next passing answer
    assert len(made) == 2
    for sample, episode in zip(made, group[1:], strict=True):
        assert sample.prompt_ids.tolist() == episode.completion.prompt_ids.tolist()
        assert sample.context_ids.tolist() == context  # the failed attempt and its feedback
        assert sample.answer_ids.tolist() == right  # a passing answer, through its eos
        assert sample.token_ids.tolist() == context + right
        assert sample.mask.tolist() == [0.0] * len(context) + [1.0] * len(right)
    assert correction_samples(group[1:2]) == []  # alone: no other passing answer
    assert correction_samples([group[0], group[0]]) == []  # nothing failed


def small_learner(tokenizer, *extra: str) -> tuple[BatchBuilder, Learner]:
    """The batch builder and the learner of a tiny model, for a group of three episodes."""
    c = load_config(None, ["env.name='self_correct'", "rl.group_size=3", "optim.lr=0.05",
                           "sampling.temperature=1.0", *extra])  # fmt: skip
    shape = TinyLlamaShape(hidden=32, layers=1, heads=2, kv_heads=1, intermediate=64,
                           max_positions=512)  # fmt: skip
    model = new_llama(tokenizer, shape, seed=0)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    settings = LearnerSettings.of(c)
    learner = Learner(settings, model, None, opt,
                      torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1))  # fmt: skip
    terms = model_terms(model, None, None, settings.temperature)
    return BatchBuilder(settings, terms, tokenizer.pad_token_id, learner.device), learner


def test_correction_batch_learns_the_answer_after_the_feedback(scorer, tokenizer):
    _, group = group_of_three(scorer, tokenizer)
    builder, learner = small_learner(tokenizer, "credit.correction_coef=0.5")
    built = builder.build([group])
    batches = built.batches
    assert built.correction_rows == 2
    made = correction_samples(group)
    correction = batches[-1]
    assert correction.advantages.shape == correction.mask.shape
    for i, sample in enumerate(made):
        n = len(sample.mask)
        assert torch.equal(correction.mask[i, :n], sample.mask)
        assert torch.equal(correction.advantages[i, :n], 0.5 * sample.mask)  # answer only
    sequences = collate([s.prompt_ids for s in made], [s.token_ids for s in made], 0)
    before = token_stats(learner.model, sequences, 1.0).logp.detach()
    # one epoch: pi_old is the update's own forward (ratio 1 at first), no forward of its own;
    # with two, the builder's forward gives it (the same seed-0 model)
    assert correction.old_logp is None
    twice = small_learner(tokenizer, "credit.correction_coef=0.5", "rl.epochs=2")[0]
    assert torch.allclose(twice.build([group]).batches[-1].old_logp, before * correction.mask)
    learner.update([correction], denominator=float(correction.mask.sum()))
    after = token_stats(learner.model, sequences, 1.0).logp.detach()
    answer = correction.mask.bool()
    assert after[answer].sum() > before[answer].sum()
    # off by default: the same group gives no correction batch
    plain = small_learner(tokenizer)[0].build([group])
    assert len(plain.batches) == len(batches) - 1 and plain.correction_rows == 0


def test_correction_coef_errors_are_found_when_the_config_loads():
    with pytest.raises(ConfigError, match="correction_coef"):
        load_config(None, ["credit.correction_coef=1.0"])  # the single-turn env: nothing to correct
    with pytest.raises(ConfigError, match="correction_coef"):
        load_config(None, ["env.name='self_correct'", "credit.correction_coef=-1"])
    with pytest.raises(ConfigError, match="critic of rl.algorithm = 'ppo'"):
        load_config(None, ["env.name='self_correct'", "credit.correction_coef=1.0",
                           "rl.algorithm='ppo'"])  # fmt: skip
