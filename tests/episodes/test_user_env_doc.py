"""The user environment of docs/episodes.md, run as a user would name it (module:Class)."""

from __future__ import annotations

import re
from pathlib import Path

from execrl.rl.episodes import EnvConfig
from execrl.tasks.schema import CallTests, Task

from .conftest import play

DOC = Path(__file__).resolve().parents[2] / "docs" / "episodes.md"


def test_the_documented_user_environment_runs(tmp_path, monkeypatch, scorer, tokenizer):
    text = DOC.read_text()
    code = re.search(r"<!-- example: my_envs.py -->\n```python\n(.*?)^```", text, re.S | re.M)
    assert code is not None, "docs/episodes.md lost its example"
    (tmp_path / "my_envs.py").write_text(code.group(1))
    monkeypatch.syspath_prepend(str(tmp_path))
    task = Task("t/p", "Write add(a, b), the sum of a and b.", CallTests(((1, 2),), (3,)), "add")
    answer = "```python\ndef add(a, b):\n    return a + b\n```"
    env = EnvConfig("my_envs:AskForCode", max_turns=2)
    _, episode = play(scorer, tokenizer, env, ["It is easy.", answer], task)
    assert episode.observations[0].startswith("Your answer has no code.")
    assert episode.trajectory.turn_rewards == (0.0, 1.0)
    assert episode.passed_by_turn(2) == [False, True]
