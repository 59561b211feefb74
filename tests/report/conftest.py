"""A synthetic run directory: metrics.jsonl, examples.jsonl, summary.json and config.toml written
by hand, shaped as `rl.run.train` writes them, so report tests need no model or sandbox."""

import json
import math

import pytest

from rl.conftest import tiny_model_dir  # noqa: F401 - a tiny model for `execrl train`

VERDICTS = ("PASSED", "WRONG_ANSWER", "RUNTIME_ERROR", "NO_CODE")


def metrics_row(step: int, steps: int) -> dict:
    p = 0.1 + 0.6 * step / max(1, steps - 1)  # the pass rate climbs from 0.1 to 0.7
    rest = 1 - p
    row = {
        "step": step,
        "reward_mean": p + 0.05,
        "reward_std": 0.2,
        "reward_p10": 0.0,
        "reward_p90": 1.0,
        "pass_rate": p,
        "sandbox_error_rate": 0.0,
        "masked_frac": 0.0,
        "kl": 0.01 * step,
        "entropy": 2.0 - 0.05 * step,
        "clip_frac": 0.02,
        "len_mean": 30.0,
        "tokens_per_s": 150.0,
        "time/generate_s": 2.0,
        "time/execute_s": 0.5,
        "time/execute_wait_s": 0.1,
        "time/update_s": 1.0,
        "mem/rss_gib": 2.0 + 0.25 * step,  # a run creeping up
        "mem/peak_rss_gib": 2.5 + 0.25 * step,
        "verdict/PASSED": p,
        "verdict/WRONG_ANSWER": rest * 0.5,
        "verdict/RUNTIME_ERROR": rest * 0.3,
        "verdict/NO_CODE": rest * 0.2,
        "skipped_update": 0.0,
        # the reward tree's nodes (a gate's reward only where it opened: null when none did)
        "reward/total": p,
        "reward/pass_fraction": p,
        "reward/style": -0.1 if step % 2 else None,
        "reward/masked": 1 if step == 5 else 0,
        "flag/no_code": 2,
        "flag/tampering": 1 if step == 7 else 0,
    }
    if step == 3:  # a skipped update logs no KL: the plots must show a gap, not fail
        for key in ("kl", "entropy", "clip_frac"):
            del row[key]
        row["skipped_update"] = 1.0
    return row


def example(step: int, score: float, text: str) -> dict:
    return {
        "step": step, "task": f"synthetic/t{step}", "score": score,
        "verdict": "PASSED" if score == 1 else "WRONG_ANSWER", "passed": score == 1,
        "masked": False, "n_tokens": 12, "truncated": False, "prompt": "Write f(x).",
        "completion": text, "reason": "",
    }  # fmt: skip


@pytest.fixture
def run_dir(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    steps = 12
    rows = [metrics_row(s, steps) for s in range(steps)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    examples = [
        example(2, 0.0, "def f(x):\n    return x <script>\x06"),
        example(5, 0.5, "def f(x):\n    return 1"),
        example(11, 1.0, "def f(x):\n    return x + 1"),
    ]
    (run / "examples.jsonl").write_text("".join(json.dumps(e) + "\n" for e in examples))
    summary = {"heldout_pass@1_before": 0.1, "heldout_pass@1_after": 0.6, "steps": steps}
    (run / "summary.json").write_text(json.dumps(summary))
    (run / "config.toml").write_text("[run]\nsteps = 12\n")
    assert not math.isnan(rows[0]["reward_mean"])
    return run
