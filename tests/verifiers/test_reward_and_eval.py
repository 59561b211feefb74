"""Verifier tasks through the doors above the sandbox: the reward tree and `execrl eval-samples`."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from execrl.cli import main
from execrl.rewards.scoring.config import RewardConfig, RewardConfigError
from execrl.rewards.scoring.scorer import RewardScorer
from execrl.tasks.catalog.registry import load_benchmark
from verifiers.verifier_helpers import needs_iverilog

TREE = {
    "type": "hierarchy",
    "levels": [
        {"type": "verifier", "name": "ran", "component": "runs", "value": 0.2},
        {"type": "verifier", "name": "rows", "component": "matches", "value": 1.0},
    ],
}


def test_a_reward_tree_grades_verifier_components(sandbox):
    task = load_benchmark("sql:n=1,difficulty=1")[0]
    config = RewardConfig.from_dict({"tree": TREE})
    fenced = f"Here it is:\n```\n{task.reference}```\n"
    wrong = f"```\n{task.tests.wrong}```"
    broken = "```\nSELECT nothing FROM nowhere\n```"
    with RewardScorer(config, sandbox=sandbox) as scorer:
        right, near, error, prose = scorer.score([task] * 4, [fenced, wrong, broken, "no idea"])
    assert right.score == 1.0 and right.components["rows"] == 1.0
    # Hierarchy: the first level reached (ran) gives 0.2, the second (rows) is not reached.
    assert near.components["ran"] == 1.0 and near.components["rows"] == 0.0
    assert near.score == pytest.approx(0.2)
    assert error.score == 0.0 and prose.score == 0.0


def test_an_unknown_component_is_a_config_error_not_a_zero(sandbox):
    task = load_benchmark("sql:n=1,difficulty=1")[0]
    tree = {"type": "verifier", "component": "mathces"}
    with RewardScorer(RewardConfig.from_dict({"tree": tree}), sandbox=sandbox) as scorer:
        with pytest.raises(ValueError, match="component 'mathces' is not one the 'sql' verifier"):
            scorer.score([task], [f"```\n{task.reference}```"])
    with pytest.raises(RewardConfigError, match="unknown key"):
        RewardConfig.from_dict({"tree": {"type": "verifier", "components": "x"}})


def test_eval_samples_scores_a_suite(tmp_path, capsys):
    tasks = load_benchmark("optimize:split=test,n=1")
    rows = [{"task_id": t.id, "completion": f"```python\n{t.reference}```"} for t in tasks]
    rows += [{"task_id": t.id, "completion": f"```python\n{t.tests.wrong}```"} for t in tasks]
    samples = tmp_path / "samples.jsonl"
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code = main(["eval-samples", str(samples), "--benchmark", "optimize:split=test,n=1", "--json"])
    assert code == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["n_samples"] == 6 and summary["verdicts"]["PASSED"] == 3
    assert summary["verdicts"]["WRONG_ANSWER"] == 3
    assert 0.5 < summary["verifier_score"] < 1.0  # 3 optimal, 3 greedy (feasible, not best)


def test_the_documented_hierarchy_grades_verilog_by_level(sandbox):
    needs_iverilog()
    text = (Path(__file__).resolve().parents[2] / "docs" / "verifiers.md").read_text()
    block = re.search(r"<!-- example: reward.toml -->\n```toml\n(.*?)\n```", text, re.S)
    config = RewardConfig.from_dict(tomllib.loads(block.group(1))["reward"])
    task = load_benchmark("verilog:n=1,difficulty=2")[0]
    broken = task.reference.replace("assign", "asign", 1).replace("always", "alway", 1)
    completions = [f"```\n{p}```" for p in (task.reference, task.tests.wrong, broken)]
    with RewardScorer(config, sandbox=sandbox) as scorer:
        right, wrong, syntax = scorer.score([task] * 3, completions)
    # Levels 0.2 (elaborates), 0.4 (simulates), 1.0 (every vector matches), base 0.
    assert (right.score, wrong.score, syntax.score) == (1.0, 0.4, 0.0)


def test_an_answer_with_no_code_counts_zero_in_the_verifier_score(tmp_path, capsys):
    # three references (score 1 each) and three answers in prose: the verifier never sees the
    # prose, and leaving it out would report 1.0 for a model that answered half the tasks
    tasks = load_benchmark("optimize:split=test,n=1")
    rows = [{"task_id": t.id, "completion": f"```python\n{t.reference}```"} for t in tasks]
    rows += [{"task_id": t.id, "completion": "I would rather not."} for t in tasks]
    samples = tmp_path / "samples.jsonl"
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code = main(["eval-samples", str(samples), "--benchmark", "optimize:split=test,n=1", "--json"])
    assert code == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["verdicts"]["PASSED"] == 3 and summary["verdicts"]["SYNTAX_ERROR"] == 3
    assert summary["verifier_score"] == pytest.approx(0.5)
