from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field

import pytest
import torch

from execrl.models.engines.sampling import Completion, SamplingParams
from execrl.models.loading.tiny import train_bpe_tokenizer
from execrl.rewards import RewardConfig, RewardScorer
from execrl.rl.episodes import EnvConfig, Episode, make_env, run_episodes
from execrl.sandbox import Sandbox

CORPUS = [
    "def add(a, b):\n    return a + b\n",
    "Feedback: test failed, expected 3",
    "print(5)",
] * 10


@pytest.fixture(scope="package")
def scorer():
    with Sandbox(workers=2) as sb, RewardScorer(RewardConfig(), sandbox=sb) as s:
        yield s


@pytest.fixture(scope="package")
def tokenizer():
    return train_bpe_tokenizer(CORPUS, vocab_size=300)


LOGPROB = -0.25  # every scripted token's behaviour log-probability


@dataclass
class ScriptedPolicy:
    """A fake model: turn t of every episode emits `turns[t]` (encoded, then eos), whatever it is
    shown. Records the prompt ids of each call."""

    tokenizer: object
    turns: list[str]
    seen: list[list[list[int]]] = field(default_factory=list)

    def ids(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False) + [self.tokenizer.eos_token_id]

    def generate(self, prompt_ids, params, *, n):
        assert n == 1
        self.seen.append([list(p) for p in prompt_ids])
        text = self.turns[len(self.seen) - 1]
        ids = self.ids(text)
        return [
            Completion(
                i,
                text,
                torch.tensor(p),
                torch.tensor(ids),
                torch.full((len(ids),), LOGPROB),
                "eos",
            )
            for i, p in enumerate(prompt_ids)
        ]


PARAMS = SamplingParams(temperature=0.0, max_new_tokens=32)


def play(
    scorer, tokenizer, env: EnvConfig, turns: list[str], task, *, chat: bool = False, **kw
) -> tuple[ScriptedPolicy, Episode]:
    """One episode of `task` in `env`, the scripted policy answering `turns`."""
    policy = ScriptedPolicy(tokenizer, turns)
    [episode] = run_episodes(
        lambda: make_env(env, scorer), [task], policy, tokenizer, PARAMS, chat=chat, **kw
    )
    return policy, episode


@pytest.fixture(autouse=True)
def _harness_readable_tmp(tmp_path):
    """As root a harness runs under a uid of its own (`sandbox/confine/command.py`), which must
    read the agents these tests write in `tmp_path`: pytest makes its folders private (0700)."""
    if os.geteuid() == 0:
        for folder in (tmp_path, *list(tmp_path.parents)[:3]):
            if str(folder).startswith(tempfile.gettempdir() + "/"):
                os.chmod(folder, 0o755)
