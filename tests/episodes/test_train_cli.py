"""`execrl train` on episodes, through the CLI: the self-correction environment end to end
(held-out pass@1 by turn, episode telemetry, the report's episode plot and examples with every
turn), and a user's own environment named in the config, whose rewards change the policy."""

from __future__ import annotations

import json
import sys

import pytest
import torch
from safetensors.torch import load_file

from execrl.cli import main
from execrl.models.loading.tiny import (
    TinyLlamaShape,
    new_llama,
    save_pretrained,
    train_bpe_tokenizer,
)

SMALL = ["rl.group_size=2", "rl.groups_per_step=2", "rl.dynamic_sampling=false",
         "data.n_train=4", "sampling.max_new_tokens=8", "sampling.temperature=1.0"]  # fmt: skip

LETTER_ENV = '''
from execrl.rl.episodes.env import Observation, StepInfo, StepResult


class LetterEnv:
    """Two turns, no sandbox: each turn earns the fraction of 'e' in what the model wrote."""

    name = "letter"

    def __init__(self, config, scorer):
        self.turn = 0

    def reset(self, task):
        self.turn = 0
        return Observation(task.prompt, task.prompt)

    def step(self, model_output):
        self.turn += 1
        reward = model_output.count("e") / max(1, len(model_output))
        info = StepInfo(self.turn)
        if self.turn == 2:
            return StepResult(None, reward, True, info)
        return StepResult(Observation("more", " more:"), reward, False, info)
'''


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    """A random tiny Llama whose context holds a feedback turn (the suite's prompts are short)."""
    corpus = ["def add(a, b):\n    return a + b\n", "Expected: 3 Test: f(1) failed", "eee"] * 10
    tokenizer = train_bpe_tokenizer(corpus, vocab_size=300)
    shape = TinyLlamaShape(hidden=32, layers=2, heads=2, kv_heads=1, intermediate=64,
                           max_positions=1024)  # fmt: skip
    return save_pretrained(new_llama(tokenizer, shape, seed=0), tokenizer,
                           tmp_path_factory.mktemp("m"))  # fmt: skip


def _train(tiny_model_dir, tmp_path, name: str, *extra: str) -> int:
    settings = [*SMALL, f"model.path={str(tiny_model_dir)!r}", f"run.out_dir={str(tmp_path)!r}",
                f"run.name={name!r}", *extra]  # fmt: skip
    return main(["train", *sum((["--set", s] for s in settings), [])])


def test_self_correct_trains_end_to_end_with_pass_by_turn_and_telemetry(tiny_model_dir, tmp_path):
    assert _train(tiny_model_dir, tmp_path, "sc", "env.name='self_correct'", "env.max_turns=2",
                  "run.steps=2", "data.n_heldout=2", "data.heldout_samples=1") == 0  # fmt: skip
    run = tmp_path / "sc"
    summary = json.loads((run / "summary.json").read_text())
    for key in ("heldout_pass@1_by_turn_before", "heldout_pass@1_by_turn_after"):
        assert len(summary[key]) == 2 and all(0 <= x <= 1 for x in summary[key])
    row = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
    # a random model fails the visible tests: every episode takes both turns
    assert row["episode/turns_mean"] == 2.0
    assert 0 < row["episode/masked_token_frac"] < 1 and row["episode/feedback_tokens_mean"] > 0
    assert {"episode/pass@turn1", "episode/pass@turn2"} <= set(row)
    assert (run / "report" / "episodes.png").is_file()
    examples = (run / "examples.jsonl").read_text()
    assert "[turn 1: model]" in examples and "[turn 2: model]" in examples
    assert "[turn 1: environment]" in examples and "Expected" in examples


def test_a_user_environment_named_in_the_config_trains_the_policy(
    tiny_model_dir, tmp_path, monkeypatch
):
    (tmp_path / "letter_env_mod.py").write_text(LETTER_ENV)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("letter_env_mod", None)
    assert _train(tiny_model_dir, tmp_path, "user", "env.name='letter_env_mod:LetterEnv'",
                  "run.steps=2", "data.heldout=''", "rl.algorithm='reinforce_pp'") == 0  # fmt: skip
    row = json.loads((tmp_path / "user" / "metrics.jsonl").read_text().splitlines()[0])
    assert row["episode/turns_mean"] == 2.0 and row["skipped_update"] == 0.0
    before = load_file(str(tiny_model_dir / "model.safetensors"))
    after = load_file(str(tmp_path / "user" / "final" / "model.safetensors"))
    assert any(not torch.equal(before[k], after[k]) for k in before)


def test_held_first_attempt_and_verdict_feedback_train_through_the_cli(tiny_model_dir, tmp_path):
    """credit.from_turn, credit.held_kl_coef (which loads the reference model),
    credit.baseline, credit.correction_coef and env.feedback = "verdict" reach the trainer
    from the config."""
    assert _train(tiny_model_dir, tmp_path, "held", "env.name='self_correct'",
                  "credit.from_turn=2", "credit.held_kl_coef=1.0", "env.feedback='verdict'",
                  "credit.baseline='reached'", "credit.correction_coef=1.0", "run.steps=2",
                  "data.heldout=''") == 0  # fmt: skip
    run = tmp_path / "held"
    assert (
        '[credit]\nfrom_turn = 2\nheld_kl_coef = 1.0\nbaseline = "reached"'
        in (run / "config.toml").read_text()
    )
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all("kl" in row for row in rows)
    assert all(row["episode/correction_samples"] >= 0 for row in rows)
    fix = "\n\nFix the code. Answer with the whole corrected solution in one code block."
    for line in (run / "examples.jsonl").read_text().splitlines():
        text = json.loads(line)["completion"]
        said = text.split("[turn 1: environment]\n")[1].split("\n[turn 2: model]")[0]
        assert said.startswith("Your code failed") and said.endswith(fix)
        assert "Test:" not in said and "Expected" not in said and len(said) < 120 + len(fix)


def test_self_correct_episodes_are_gathered_ahead_by_the_rollout_thread(tiny_model_dir, tmp_path):
    """rl.max_staleness builds its rollouts as the synchronous step does (`rl.rollout.rollouts`,
    from the environment's source): episodes of two turns, one policy version old."""
    assert _train(tiny_model_dir, tmp_path, "ahead", "env.name='self_correct'",
                  "env.max_turns=2", "rl.max_staleness=1", "run.steps=2",
                  "data.heldout=''") == 0  # fmt: skip
    rows = [json.loads(x) for x in (tmp_path / "ahead" / "metrics.jsonl").read_text().splitlines()]
    assert [r["async/staleness"] for r in rows] == [0, 1]
    assert all(r["episode/turns_mean"] == 2.0 for r in rows)
