"""coder_tester: one policy writes the tests, then the function. A scripted group of three
episodes with known outcomes: the tester's rewards (what its suite catches among the group's
coders, 0 unless it passes on the reference), the coder's (the hidden tests), each role's GRPO
advantages over its own turns, by hand; the evaluation's summary by role."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest
import torch
from safetensors.torch import load_file

from batch_helpers import builder
from execrl.eval.episodes_eval import by_role
from execrl.rl.episodes import EnvConfig, make_env, run_episodes
from execrl.rl.episodes.tester_grade import checks_of, hidden_suite
from execrl.rl.episodes.turn_loop import finish_groups
from execrl.rl.objective import credit
from execrl.rl.rollout.episode_sources import episode_scored
from execrl.tasks.schema import AssertTests, StdioCase, StdioTests, Task

from .conftest import PARAMS, ScriptedPolicy
from .test_environments import ADD, PROMPT, RIGHT, WRONG
from .test_train_cli import _train
from .test_train_cli import tiny_model_dir as tiny_model_dir_fixture

TASK = replace(ADD, reference=PROMPT + RIGHT)
ENV = EnvConfig("coder_tester", max_turns=3)
tiny_model_dir = tiny_model_dir_fixture  # the CLI test's tiny model, built as test_train_cli's
GOOD = "```python\nassert add(1, 2) == 3\nassert add(2, 2) == 4\n```"  # kills a - b and a * b
REJECTS_ALL = "```python\nassert add(1, 2) == 4\n```"  # fails on the reference
WEAK = "```python\nassert add(0, 0) == 0\n```"  # passes on the reference, kills neither
TIMES = "    return a * b\n"


def play_group(scorer, tokenizer, scripts: list[list[str]]):
    """One episode per script (the tester's answer, then the coder's), finished as a group."""
    policies = [ScriptedPolicy(tokenizer, turns) for turns in scripts]
    episodes = [
        run_episodes(lambda: make_env(ENV, scorer), [TASK], p, tokenizer, PARAMS, chat=False)[0]
        for p in policies
    ]
    env = make_env(ENV, scorer)
    return policies, finish_groups(env, [TASK] * len(episodes), episodes, [0] * len(episodes))


@pytest.fixture(scope="module")
def group(scorer, tokenizer):
    """A: good tests, a - b fixed to a + b after feedback. B: tests that reject the reference,
    a - b twice. C: weak tests, a * b, which passes them (no revision)."""
    return play_group(scorer, tokenizer, [[GOOD, WRONG, RIGHT], [REJECTS_ALL, WRONG, WRONG],
                                          [WEAK, TIMES]])  # fmt: skip


def test_the_hidden_tests_become_a_suite_and_the_tester_answer_checks():
    assert hidden_suite(TASK) == (
        "assert add(*(1, 2)) == 3\nassert add(*(10, 20)) == 30\nassert add(*(7, -3)) == 4\n"
    )
    checks = checks_of(
        "import math\ndef test_one():\n    assert add(1, 1) == 2\nassert add(0, 0) == 0"
    )
    assert checks == AssertTests(statements=("import math", "def test_one():\n    assert add(1, 1) == 2",
                                             "test_one()", "assert add(0, 0) == 0"))  # fmt: skip
    assert checks_of("def broken(:") is None and checks_of(None) is None
    with pytest.raises(ValueError, match="t/add.*reference"):
        make_env(ENV, None).reset(ADD)  # no reference: the tester's gate cannot run


def test_tester_rewards_by_hand_and_the_reference_gate(group):
    _, (a, b, c) = group
    # wrong programs of the group: a - b (A's first try, B's two) and a * b (C), each once.
    # A's suite rejects both: kill 1, and it runs the reference's one line the hidden tests
    # run: coverage 1 -> 0.8 + 0.2. B's fails on the reference: 0 whatever it rejects. C's
    # passes on the reference and rejects neither: 0.8 x 0 + 0.2 x 1.
    assert [e.steps[0].reward for e in (a, b, c)] == pytest.approx([1.0, 0.0, 0.2])
    assert [e.trajectory.turn_rewards[0] for e in (a, b, c)] == pytest.approx([1.0, 0.0, 0.2])
    assert "the group's 2 wrong coder programs" in a.steps[0].info.note
    parts = [e.steps[-1].info.graded.reward.components for e in (a, b, c)]
    assert [p["tester/passes_reference"] for p in parts] == [1.0, 0.0, 1.0]
    assert [p["tester/kill_rate"] for p in parts] == [1.0, 0.0, 0.0]
    assert [p["coder/score"] for p in parts] == [1.0, 0.0, 0.0]
    assert all(s.info.role == "coder" for e in (a, b, c) for s in e.steps[1:])


def test_coder_rewards_feedback_and_turns(group):
    _, (a, b, c) = group
    # the coder's last turn holds the hidden tests' reward, earlier turns 0
    assert [s.reward for s in a.steps[1:]] == [0.0, 1.0] and a.passed_by_turn(3) == [
        False,
        False,
        True,
    ]
    assert [s.reward for s in b.steps[1:]] == [0.0, 0.0] and len(c.steps) == 2
    # a - b fails both of A's tests: 1 - 2 = -1, 2 - 2 = 0
    said = a.observations[1]
    assert said.startswith("2 of the 2 tests written before your code fail on it:\n")
    assert "- assert add(1, 2) == 3\n  WRONG_ANSWER: AssertionError\n" in said
    assert c.steps[1].info.visible_passed is True  # a * b passes the weak suite: no revision


def test_each_role_gets_its_own_grpo_advantage_by_hand(group, scorer):
    policies, episodes = group
    scored = [episode_scored(0, TASK, e, 1.0, scorer) for e in episodes]
    assert [s.turns.roles for s in scored] == [("tester", "coder", "coder")] * 2 + [
        ("tester", "coder")
    ]
    [batch] = builder("env.name='coder_tester'", "env.max_turns=3", "rl.algorithm='grpo'",
                      "rl.group_size=3", keep_idle_rows=True).build([scored]).batches  # fmt: skip
    # tester returns 1, 0, 0.2: mean 0.4, unbiased std sqrt(0.28); coder returns 1, 0, 0:
    # mean 1/3, unbiased std sqrt(1/3)
    tester = [(r - 0.4) / (math.sqrt(0.28) + 1e-4) for r in (1.0, 0.0, 0.2)]
    coder = [(r - 1 / 3) / (math.sqrt(1 / 3) + 1e-4) for r in (1.0, 0.0, 0.0)]
    for i, (s, policy) in enumerate(zip(scored, policies, strict=True)):
        n = s.completion.n_tokens
        mask = s.turns.policy_mask
        tester_tokens = credit.turn_tokens(n, s.turns.ends, [0]) * mask
        coder_tokens = mask - tester_tokens
        assert int(tester_tokens.sum()) == len(policy.ids(policy.turns[0]))
        expected = tester[i] * tester_tokens + coder[i] * coder_tokens
        assert torch.allclose(batch.advantages[i, :n], expected, atol=1e-5)
        assert (batch.advantages[i, :n][mask == 0] == 0).all()  # never an environment token


def test_role_tokens_and_returns_by_hand():
    # turns end at 1, 4 and 6: turn 0 holds 0-1, turn 1 holds 2-4, turn 2 holds 5-6
    assert credit.turn_tokens(8, (1, 4, 6), [0]).tolist() == [1, 1, 0, 0, 0, 0, 0, 0]
    assert credit.turn_tokens(8, (1, 4, 6), [1, 2]).tolist() == [0, 0, 1, 1, 1, 1, 1, 0]
    # discount 0.5: the coder's turns 1 and 2 earn 0.5 * 0 + 0.25 * 1; the roles add up
    assert credit.role_return((0.6, 0.0, 1.0), [1, 2], 0.5) == 0.25
    assert credit.role_return((0.6, 0.0, 1.0), [0], 0.5) + 0.25 == credit.discounted_return(
        (0.6, 0.0, 1.0), 0.5
    )


def test_every_coder_passing_grades_the_tester_on_the_reference_mutants(scorer, tokenizer):
    _, (good, weak) = play_group(scorer, tokenizer, [[GOOD, RIGHT], [WEAK, RIGHT]])
    assert "mutants of the reference (every coder passed)" in good.steps[0].info.note
    assert good.steps[0].reward > weak.steps[0].reward > 0


def test_evaluation_by_role(group):
    _, episodes = group
    roles = by_role(list(episodes))
    assert roles["coder"]["pass@1_by_turn"] == pytest.approx([0.0, 1 / 3])
    assert roles["tester"]["components"] == pytest.approx(
        {"passes_reference": 2 / 3, "kill_rate": 1 / 3, "coverage": 2 / 3}
    )
    assert "tester/score" not in roles["coder"]["components"]


def test_a_task_without_a_function_is_refused_by_name(scorer):
    io = StdioTests((StdioCase("1\n", "1\n"),))
    stdio = Task("t/io", "read a line", io, reference="print(input())")
    with pytest.raises(ValueError, match="t/io: coder_tester needs a Python task"):
        make_env(ENV, scorer).reset(stdio)
    with pytest.raises(ValueError, match="at least 2"):
        make_env(EnvConfig("coder_tester", max_turns=1), scorer)


def test_coder_tester_trains_from_the_cli_with_per_role_metrics(tiny_model_dir, tmp_path):
    """`execrl train --set env.name=coder_tester`: two steps on a tiny random model. Its
    answers earn nothing, so an entropy bonus makes sure the update moves the weights; the
    log holds each role's grade and pass@1 after each of the three turns (the tester's first)."""
    assert _train(tiny_model_dir, tmp_path, "ct", "env.name='coder_tester'", "env.max_turns=3",
                  "rl.entropy_coef=0.01", "run.steps=2", "data.n_heldout=2",
                  "data.heldout_samples=1") == 0  # fmt: skip
    run = tmp_path / "ct"
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 2
    for row in rows:
        assert {"reward/tester/score", "reward/coder/score", "episode/pass@turn1"} <= set(row)
        assert row["episode/pass@turn1"] == 0.0  # the tester's turn answers no hidden test
        assert 2.0 <= row["episode/turns_mean"] <= 3.0
    summary = json.loads((run / "summary.json").read_text())
    assert len(summary["heldout_pass@1_by_turn_after"]) == 3
    before = load_file(str(tiny_model_dir / "model.safetensors"))
    after = load_file(str(run / "final" / "model.safetensors"))
    assert any(not torch.equal(before[k], after[k]) for k in before)
