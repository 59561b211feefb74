"""Harness episodes: a user's agent program (tests/episodes/fixtures/two_call_agent.py) runs each
episode against the policy server; its calls become the trajectory, its answer is graded in
the sandbox."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from execrl.rl.episodes.harness import (
    HarnessConfig,
    HarnessError,
    HarnessRunner,
    run_harness_episodes,
)

from .conftest import LOGPROB, PARAMS, ScriptedPolicy
from .test_environments import ADD, RIGHT, WRONG

AGENT = Path(__file__).parent / "fixtures" / "two_call_agent.py"
CHECK = "\nCheck it and answer again.\n"  # what the agent adds before its second call


def harness(*flags: str, **options) -> HarnessConfig:
    return HarnessConfig(" ".join([sys.executable, str(AGENT), *flags]), **options)


def test_a_two_call_harness_episode_is_recorded_and_graded(scorer, tokenizer):
    policy = ScriptedPolicy(tokenizer, [WRONG, RIGHT])
    [episode] = run_harness_episodes([ADD], policy, tokenizer, PARAMS, scorer, harness())
    # by hand: no chat template, so the conversation is its contents; the second call's ids
    # are the first call's ids + its sampled ids (eos included) + the agent's new text alone
    prompt = tokenizer(ADD.prompt)["input_ids"]
    wrong, right = policy.ids(WRONG), policy.ids(RIGHT)
    added = tokenizer.encode(CHECK, add_special_tokens=False)
    assert policy.seen == [[prompt], [prompt + wrong + added]]
    traj = episode.trajectory
    assert traj.token_ids == tuple(prompt + wrong + added + right)
    assert traj.loss_mask == tuple([0] * len(prompt) + [1] * len(wrong) + [0] * len(added)
                                   + [1] * len(right))  # fmt: skip
    assert traj.logprobs == tuple([0.0] * len(prompt) + [LOGPROB] * len(wrong)
                                  + [0.0] * len(added) + [LOGPROB] * len(right))  # fmt: skip
    # the answer file held the second answer: the hidden tests pass, the reward is on call 2
    assert traj.turn_rewards == (0.0, 1.0) and not episode.masked
    assert episode.outputs == (WRONG, RIGHT) and episode.steps[-1].info.hidden_passed is True
    assert episode.observations == (CHECK,)  # what the agent said between the two calls


def test_the_answer_is_stdout_when_the_harness_writes_no_answer_file(scorer, tokenizer):
    policy = ScriptedPolicy(tokenizer, [WRONG, RIGHT])
    [episode] = run_harness_episodes([ADD], policy, tokenizer, PARAMS, scorer,
                                     harness("--stdout"))  # fmt: skip
    assert episode.steps[-1].info.hidden_passed is True and episode.trajectory.turn_rewards[-1] == 1


def test_a_harness_never_sees_the_hidden_tests_or_the_data_directory(
    scorer, tokenizer, tmp_path, monkeypatch
):
    monkeypatch.setenv("EXECRL_DATA_DIR", "/where/hidden/tests/live")
    policy = ScriptedPolicy(tokenizer, [WRONG, RIGHT])
    # it writes what it saw in its own folder (relative: it starts there), the one place it may
    runner = HarnessRunner(policy, tokenizer, PARAMS, scorer, harness("--dump", "seen.json"))
    try:
        runner.run([ADD])
        [dump] = runner.workdir.glob("*/seen.json")
        seen = json.loads(dump.read_text())
    finally:
        runner.close()
    assert seen["task"] == {"id": "t/add", "prompt": ADD.prompt, "entry_point": "add",
                            "language": "python"}  # fmt: skip
    # the task file is exactly these four fields: no test, hidden or visible, in any form
    assert "EXECRL_DATA_DIR" not in seen["env"]
    assert {k for k in seen["env"] if k.startswith("EXECRL_")} == {
        "EXECRL_EPISODE_ID", "EXECRL_MODEL", "EXECRL_TASK_FILE", "EXECRL_ANSWER_FILE"}  # fmt: skip
    assert seen["env"]["OPENAI_BASE_URL"].endswith(f"/e/{seen['env']['EXECRL_EPISODE_ID']}/v1")


def test_a_failing_harness_masks_its_episode_and_says_why(scorer, tokenizer):
    other = replace(ADD, id="t/add2")
    policy = ScriptedPolicy(tokenizer, [WRONG, RIGHT, WRONG, RIGHT])
    config = harness("--fail-task", "t/add", harness_parallel=1)  # one at a time: calls in order
    failed, passed = run_harness_episodes([ADD, other], policy, tokenizer, PARAMS, scorer, config)
    assert failed.masked and failed.steps[-1].info.hidden_passed is None
    note = failed.steps[-1].info.note
    assert "exit status 3" in note and "the tool I wanted is missing" in note
    assert not passed.masked and passed.trajectory.turn_rewards == (0.0, 1.0)


def test_a_harness_that_fails_every_episode_stops_the_run(scorer, tokenizer):
    policy = ScriptedPolicy(tokenizer, [WRONG, RIGHT] * 2)
    with pytest.raises(HarnessError, match="failed on all 1 episodes.*exit status 3"):
        run_harness_episodes([ADD], policy, tokenizer, PARAMS, scorer,
                             harness("--fail-task", "t/add"))  # fmt: skip


def test_a_hung_harness_is_killed_at_its_timeout(scorer, tokenizer):
    policy = ScriptedPolicy(tokenizer, [WRONG, RIGHT])
    with pytest.raises(HarnessError, match="timed out after 0.5 s"):
        run_harness_episodes([ADD], policy, tokenizer, PARAMS, scorer,
                             harness("--sleep", "60", harness_timeout_s=0.5))  # fmt: skip


def test_a_process_the_harness_leaves_behind_cannot_hang_the_run(scorer, tokenizer):
    """The harness exits at once but leaves a process (its own session, out of reach of the
    group kill) holding its output: the episode ends when the harness does."""
    policy = ScriptedPolicy(tokenizer, [WRONG, RIGHT])
    start = time.monotonic()
    [episode] = run_harness_episodes([ADD], policy, tokenizer, PARAMS, scorer,
                                     harness("--orphan", "30", harness_timeout_s=20))  # fmt: skip
    assert time.monotonic() - start < 15 and not episode.masked
    assert episode.steps[-1].info.hidden_passed is True


def test_a_rewritten_history_is_masked_where_the_trainer_cannot_learn_segments(scorer, tokenizer):
    other = replace(ADD, id="t/add2")
    policy = ScriptedPolicy(tokenizer, [WRONG, RIGHT, WRONG, RIGHT])
    config = harness("--rewrite-task", "t/add", harness_parallel=1)  # the other one appends
    episode, plain = run_harness_episodes([ADD, other], policy, tokenizer, PARAMS, scorer,
                                          config)  # fmt: skip
    assert not plain.masked
    note = episode.steps[-1].info.note
    assert episode.masked and "rewrote its history: 2 segments (not trained: with credit." in note
    # the segment with the last call stands for the episode (masked: it is not trained on)
    fresh = tokenizer(ADD.prompt + CHECK)["input_ids"]
    assert policy.seen[1] == [fresh]
    assert episode.trajectory.token_ids == tuple(fresh + policy.ids(RIGHT))
    assert episode.segments == ()


def test_the_log_says_how_a_rewritten_history_trains(scorer, tokenizer):
    policy, said = ScriptedPolicy(tokenizer, [WRONG, RIGHT] * 2), []
    episodes = run_harness_episodes([ADD, ADD], policy, tokenizer, PARAMS, scorer,
                                    harness("--rewrite", harness_parallel=1),
                                    log=said.append)  # fmt: skip
    assert all(e.masked for e in episodes)
    assert said == [
        "harness: 2 of 2 episodes masked: the harness rewrote its history: 2 segments (not "
        "trained: with credit.from_turn > 1 turns are numbered per segment; "
        "docs/harness.md) (with credit.from_turn = 1 they train: credit.segments)"
    ]


def test_a_rewritten_history_keeps_every_segment_token_exact_for_the_trainer(scorer, tokenizer):
    policy = ScriptedPolicy(tokenizer, [WRONG, RIGHT])
    [episode] = run_harness_episodes([ADD], policy, tokenizer, PARAMS, scorer,
                                     harness("--rewrite"), segments=True)  # fmt: skip
    assert not episode.masked and episode.steps[-1].info.hidden_passed is True
    prompt, fresh = (tokenizer(t)["input_ids"] for t in (ADD.prompt, ADD.prompt + CHECK))
    wrong, right = policy.ids(WRONG), policy.ids(RIGHT)
    # by hand: the last call's segment stands for the episode, the first call's goes beside it
    assert episode.trajectory.token_ids == tuple(fresh + right)
    assert episode.trajectory.turn_rewards == (1.0,)
    [first] = episode.segments
    assert first.token_ids == tuple(prompt + wrong) and first.prompt_length == len(prompt)
    assert first.loss_mask == tuple([0] * len(prompt) + [1] * len(wrong))
    assert first.logprobs == tuple([0.0] * len(prompt) + [LOGPROB] * len(wrong))


def test_a_bad_harness_command_is_refused_naming_the_field():
    with pytest.raises(ValueError, match="env.harness is empty"):
        HarnessConfig("  ")
    with pytest.raises(ValueError, match="env.harness 'python \"x': cannot be split"):
        HarnessConfig('python "x')


def test_the_documented_harness_runs_as_written(scorer, tokenizer, tmp_path):
    """docs/harness.md's complete harness, taken from the page, runs an episode."""
    page = (Path(__file__).parents[2] / "docs" / "harness.md").read_text()
    code = page.split("```python\n")[1].split("```")[0]
    agent = tmp_path / "doc_agent.py"
    agent.write_text(code)
    policy = ScriptedPolicy(tokenizer, [WRONG, RIGHT])
    config = HarnessConfig(f"{sys.executable} {agent}")
    [episode] = run_harness_episodes([ADD], policy, tokenizer, PARAMS, scorer, config)
    assert episode.steps[-1].info.hidden_passed is True and len(episode.trajectory.turn_spans) == 2


def test_a_masked_harness_episode_enters_no_loss_or_advantage(scorer, tokenizer):
    """An episode whose harness made no call (its answer is not the model's: masked, though
    it passes) and a rewritten one reach the trainer with no counted token and no advantage."""
    from execrl.rl.rollout.episode_sources import episode_scored

    from .test_training import builder_for

    policy = ScriptedPolicy(tokenizer, [WRONG, RIGHT, WRONG, RIGHT])
    [good] = run_harness_episodes([ADD], policy, tokenizer, PARAMS, scorer, harness())
    [silent] = run_harness_episodes([ADD], policy, tokenizer, PARAMS, scorer, harness("--no-call"))
    [rewritten] = run_harness_episodes([ADD], policy, tokenizer, PARAMS, scorer,
                                       harness("--rewrite"))  # fmt: skip
    assert silent.masked and silent.steps[-1].info.note == "the harness made no call to the policy"
    assert silent.trajectory.token_ids == tuple(tokenizer(ADD.prompt)["input_ids"])
    for masked in (silent, rewritten):
        group = [episode_scored(0, ADD, e, 1.0, scorer) for e in (good, masked)]
        assert group[0].valid and not group[1].valid
        # nothing to learn: no row in the update (`skips_idle_rows`)
        assert builder_for("grpo", keep_idle_rows=False).build([group]).batches == []
        [batch] = builder_for("grpo").build([group]).batches
        assert batch.mask[1].sum() == 0 and (batch.advantages[1] == 0).all()
        assert batch.mask[0].sum() == sum(good.trajectory.loss_mask)


def test_env_max_tokens_caps_each_call_of_a_harness_episode(scorer, tokenizer):
    """[env] max_tokens bounds a call's prompt + completion as a context would: the agent's
    second call, past it, is refused, and the agent's failure is said, not scored."""
    from execrl.rl.episodes import EnvConfig

    prompt = len(tokenizer(ADD.prompt)["input_ids"])
    env = EnvConfig("harness", harness=harness().harness, max_tokens=prompt + 2)
    policy = ScriptedPolicy(tokenizer, [WRONG, RIGHT])
    with pytest.raises(
        HarnessError, match="exit status 1; the server refused 1 call.*a call's limit is"
    ):
        run_harness_episodes([ADD], policy, tokenizer, PARAMS, scorer, env)
    assert len(policy.seen) == 1  # the second call never reached the engine
