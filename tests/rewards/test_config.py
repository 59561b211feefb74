"""Reward trees from TOML: the hierarchical gated reward of docs/rewards.md, scored for real."""

from __future__ import annotations

import pytest

from execrl.rewards import RewardConfig, RewardConfigError, RewardScorer, build_reward
from execrl.rewards.result import Flag
from execrl.rewards.scoring.config import sandbox_config_of

from .conftest import TASK

TOML = """
[sandbox.limits]
wall_s = 2.0

[reward]
program = "extract"

[reward.hacks]
penalties = { tampering = "min", early_exit = "min", hardcoded_visible = "min" }

[reward.tree]
type = "sum"
name = "total"

[[reward.tree.terms]]
weight = 1.0
[reward.tree.terms.reward]
type = "hierarchy"
base = -1.0
levels = [
  { type = "syntax", value = -0.6 },
  { type = "runs", value = -0.3 },
  { type = "pass", tests = "visible", value = 0.3 },
  { type = "pass_fraction", value = 1.0 },
]

[[reward.tree.terms]]
weight = 0.1
[reward.tree.terms.reward]
type = "gate"
condition = { type = "pass" }
reward = { type = "style", per_violation = 0.1 }
"""

FENCE = "```python\n{}```"
CASES = [
    # (completion, expected score, why)
    (FENCE.format("def f(x):\n    return x + 1\n"), 1.0, "all levels: 1.0; gate open, style 0"),
    (FENCE.format("def f(x):\n  return x + 1\n"), 0.99, "1.0 + 0.1 * (-0.1 for one E111)"),
    (FENCE.format("def f(x):\n    return x\n"), -0.3, "runs, fails visible: -0.3; gate shut"),
    (FENCE.format("def f(x):\n    return 1 / 0\n"), -0.6, "parses, crashes: -0.6"),
    (FENCE.format("def f(x:\n"), -1.0, "does not parse: base -1.0"),
    ("I do not know.", -1.0, "no code: syntax level fails: -1.0"),
    # passes the visible f(10) == 11 by hard-coding it, 2 of 3 hidden: 0.3 before the penalty;
    # flagged hardcoded_visible -> the tree's minimum: -1.0 + 0.1 * min(-1, 0) = -1.1
    (
        FENCE.format(
            "def f(x):\n    if x == 10:\n        return 11\n    return 2 if x < 2 else 0\n"
        ),
        -1.1,
        "hard-coded visible test",
    ),
]


def test_toml_tree_builds_with_unique_names(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text(TOML)
    config = RewardConfig.load(path)
    reward = config.reward()
    assert reward.bounds == pytest.approx((-1.1, 1.0))
    assert reward.needs == {"hidden", "visible"}
    # the file's [sandbox] is the sandbox's (one home for sandbox settings), not the reward's
    assert sandbox_config_of(path).limits.wall_s == 2.0 and not hasattr(config, "sandbox")


def test_toml_scores_equal_hand_computed(tmp_path, sandbox):
    path = tmp_path / "run.toml"
    path.write_text(TOML)
    scorer = RewardScorer(RewardConfig.load(path), sandbox=sandbox)
    results = scorer.score([TASK] * len(CASES), [c for c, _, _ in CASES])
    for (_, expected, why), r in zip(CASES, results, strict=True):
        assert r.score == pytest.approx(expected), why
    assert Flag.NO_CODE in results[5].flags
    assert Flag.HARDCODED_VISIBLE in results[6].flags
    assert results[0].components["total"] == 1.0 and results[0].components["pass_visible"] == 1.0


def test_config_errors_name_the_key():
    with pytest.raises(RewardConfigError, match=r"reward.tree.terms\[0\]: unknown reward type"):
        build_reward({"type": "sum", "terms": [{"type": "passs"}]})
    with pytest.raises(RewardConfigError, match=r"unknown key\(s\) \['treshold'\]"):
        build_reward(
            {
                "type": "gate",
                "condition": {"type": "pass"},
                "reward": {"type": "syntax"},
                "treshold": 1,
            }
        )
    with pytest.raises(RewardConfigError, match="per_violation: expected float"):
        build_reward({"type": "style", "per_violation": "high"})
    with pytest.raises(RewardConfigError, match="a level needs `value`"):
        build_reward({"type": "hierarchy", "levels": [{"type": "syntax"}]})
    with pytest.raises(RewardConfigError, match="already used"):
        build_reward(
            {
                "type": "product",
                "factors": [{"type": "syntax", "name": "a"}, {"type": "runs", "name": "a"}],
            }
        )
    with pytest.raises(RewardConfigError, match="unknown key"):
        RewardConfig.from_dict({"tree": {"type": "pass"}, "wokers": 2})
    with pytest.raises(ValueError, match="unknown flag"):
        RewardConfig.from_dict({"hacks": {"penalties": {"tamper": -1}}})


def test_default_names_count_up():
    reward = build_reward({"type": "sum", "terms": [{"type": "syntax"}, {"type": "syntax"}]})
    assert [r.name for _, r in reward.terms] == ["syntax", "syntax_2"]
