"""The user-written verifier of docs/verifiers.md, run end to end from the doc's own text."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from execrl.cli import main
from execrl.rewards.scoring.config import RewardConfig
from execrl.rewards.scoring.scorer import RewardScorer
from execrl.tasks.catalog.registry import load_benchmark

DOC = Path(__file__).resolve().parents[2] / "docs" / "verifiers.md"


def example(name: str) -> str:
    """The fenced block that follows `<!-- example: NAME -->` in the doc."""
    text = DOC.read_text(encoding="utf-8")
    found = re.search(rf"<!-- example: {re.escape(name)} -->\n```\w*\n(.*?)\n```", text, re.S)
    assert found, f"docs/verifiers.md has no example {name}"
    return found.group(1) + "\n"


@pytest.fixture
def user_files(tmp_path, monkeypatch):
    (tmp_path / "my_verifiers.py").write_text(example("my_verifiers.py"))
    tasks = tmp_path / "wordcount.jsonl"
    tasks.write_text(example("wordcount.jsonl"))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tasks
    sys.modules.pop("my_verifiers", None)


def test_the_documented_verifier_validates_and_evaluates(user_files, tmp_path, capsys):
    bench = f"jsonl:{user_files}"
    assert main(["tasks", "validate", bench]) == 0
    assert "1/1 reference solutions pass; 0 known defect(s), 0 new failure(s)" in (
        capsys.readouterr().out
    )
    (task,) = load_benchmark(bench)
    samples = tmp_path / "samples.jsonl"
    rows = [
        {"task_id": task.id, "completion": f"```python\n{program}```"}
        for program in (task.reference, task.tests.wrong, "print('counts.json')\n")
    ]
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["eval-samples", str(samples), "--benchmark", bench, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["verdicts"]["PASSED"] == 1 and summary["verdicts"]["WRONG_ANSWER"] == 2


def test_the_documented_verifier_feeds_a_reward_tree(user_files):
    (task,) = load_benchmark(f"jsonl:{user_files}")
    config = RewardConfig.from_dict({"tree": {"type": "verifier", "component": "words"}})
    with RewardScorer(config) as scorer:
        right, wrong = scorer.score(
            [task, task], [f"```python\n{task.reference}```", f"```python\n{task.tests.wrong}```"]
        )
    # The text has 5 distinct words (the, cat, and, dog, bird); the wrong program counts each
    # once and keeps "The" apart: cat, dog, bird right of max(5, 6) entries.
    assert right.score == 1.0 and wrong.score == pytest.approx(3 / 6)
