"""The step's metrics row from typed group summaries, computed by hand."""

from __future__ import annotations

from execrl.rewards.result import Flag
from execrl.rl.metrics import step_metrics
from execrl.rl.rollout.groups import Gathered, GroupSummary
from execrl.rl.update.trainer import UpdateMetrics


def group(task, scores, valid, verdicts, components, causes=("", "")) -> GroupSummary:
    n = len(scores)
    return GroupSummary(task=task, scores=tuple(scores), valid=tuple(valid),
                        passed=tuple(v == "PASSED" for v in verdicts), n_tokens=(4,) * n,
                        truncated=(False,) * n, verdicts=tuple(verdicts),
                        flags=tuple(("sandbox_error",) if c else () for c in causes),
                        components=tuple(components), sandbox_causes=tuple(causes),
                        flagged=())  # fmt: skip


def test_nodes_flags_masked_and_sandbox_causes():
    gate_open = {"total": 1.0, "pass": 1.0, "style": -0.2}
    gate_shut = {"total": 0.0, "pass": 0.0}
    every = [
        group(0, [1.0, 0.0], [True, True], ["PASSED", "WRONG_ANSWER"], [gate_open, gate_shut]),
        group(1, [0.0, 0.0], [True, False], ["WRONG_ANSWER", "SANDBOX_ERROR"], [gate_shut, {}],
              causes=("", "worker_died")),
    ]  # fmt: skip
    got = Gathered(local=[], kept=every[:1], every=every, drawn=2, rounds=1)
    row = step_metrics(3, got, UpdateMetrics(value_loss=0.5), 1.0, 1.0,
                       nodes=["total", "pass", "style", "never"])  # fmt: skip
    # 3 valid samples: total (1 + 0 + 0) / 3; style only where the gate opened; never: null
    assert row["reward/total"] == 1 / 3 and row["reward/pass"] == 1 / 3
    assert row["reward/style"] == -0.2 and row["reward/never"] is None
    assert row["reward/masked"] == 1 and row["masked_frac"] == 0.25
    assert row["sandbox_error/worker_died"] == 1 and row["flag/sandbox_error"] == 1
    assert {f"flag/{f.value}" for f in Flag} <= set(row) and row["flag/no_code"] == 0
    assert row["groups_kept"] == 1 and row["value_loss"] == 0.5 and row["pass_rate"] == 0.25
    # the valid scores 1, 0, 0 (sorted 0, 0, 1): the nearest ranks of 0.1 and 0.9 are 0 and 2
    assert row["reward_p10"] == 0.0 and row["reward_p90"] == 1.0
