"""benchmarks/trl_vs_execrl.py runs both trainers and reports what it measured."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("trl")


def test_benchmark_prints_both_rates_and_their_ratio(tmp_path):
    args = ["--steps", "2", "--rounds", "2", "--model", "random", "--group-size", "2",
            "--prompts", "2", "--max-new-tokens", "8", "--n-tasks", "4", "--last", "1",
            "--eval-samples", "2"]  # fmt: skip
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "trl_vs_execrl.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path),
            "TMPDIR": str(tmp_path),
            "HF_HUB_OFFLINE": "1",
        },  # fmt: skip
    )
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["rounds"] == 2 and len(summary["ratio_per_round"]) == 2
    assert summary["execrl_steps_per_s"] > 0 and summary["trl_steps_per_s"] > 0
    # the ratio is the median of the per-round ratios (two rounds: their mean)
    assert summary["ratio"] == pytest.approx(sum(summary["ratio_per_round"]) / 2, abs=2e-3)
    assert summary["batch"] == 4 and summary["max_new_tokens"] == 8
    assert 0.0 <= summary["execrl_reward_last"] <= 1.0
    assert 0.0 <= summary["trl_reward_last"] <= 1.0
    assert 0.0 <= summary["execrl_final_reward"] <= 1.0
    assert 0.0 <= summary["trl_final_reward"] <= 1.0
    # each side's rounds were printed, steps and rewards included
    assert done.stderr.count("round 1 execrl") == 1 and done.stderr.count("round 2 trl") == 1
