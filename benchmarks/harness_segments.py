"""RL through an agent that rewrites its own history, on the embedded default.

The agent (`examples/agents/draft_then_rewrite.py`) drafts an answer, then asks again in a fresh
conversation carrying the draft as a comment above the task, and submits the second answer: its
two calls do not extend one conversation, so every episode has two token-exact segments. Until
segments were trained, every such episode was masked and a run learnt nothing; now each segment
is trained with the episode's advantage (docs/harness.md). Runs `execrl train` with GRPO for
each seed (the other settings the quickstart's, with --set to change any) and tabulates the
held-out pass@1 through the agent itself (`heldout_pass@1_by_turn`, its last entry: the
submitted answer) before and after, and the segments trained a step. The last line is JSON, with
the load average before and after each run.

    python benchmarks/harness_segments.py --out runs/segments --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

AGENT = Path(__file__).resolve().parent.parent / "examples" / "agents" / "draft_then_rewrite.py"
SETTINGS = {
    "env.name": "'harness'",
    "env.harness": repr(f"{sys.executable} {AGENT}"),
    "env.max_turns": 2,  # the agent's two calls: the held-out table has an entry for each
    "env.harness_parallel": 8,
    "run.steps": 40,
    "data.n_heldout": 64,
    "data.heldout_samples": 2,
}


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def train(out: Path, seed: int, extra: list[str]) -> dict:
    sets = [f"{k}={v}" for k, v in SETTINGS.items()]
    sets += [f"run.seed={seed}", f"run.out_dir={str(out)!r}", f"run.name='seed{seed}'", *extra]
    command = [sys.executable, "-m", "execrl.cli", "train"]
    for item in sets:
        command += ["--set", item]
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    load_before = load_average()
    done = subprocess.run(command, check=True, env=env, stdout=subprocess.PIPE, text=True)
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    rows = [json.loads(x) for x in (out / f"seed{seed}" / "metrics.jsonl").open()]
    summary["segment_samples_mean"] = statistics.mean(r["episode/segment_samples"] for r in rows)
    summary["loadavg"] = [load_before, load_average()]
    return summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args()
    runs = {seed: train(args.out, seed, args.sets) for seed in args.seeds}
    print("seed  through the agent: before -> after   segments trained a step   seconds")
    for seed, s in runs.items():
        before, after = (
            s["heldout_pass@1_by_turn_before"][-1],
            s["heldout_pass@1_by_turn_after"][-1],
        )
        print(f"{seed:>4}  {before:.3f} -> {after:.3f} ({100 * (after - before):+.1f})"
              f"{s['segment_samples_mean']:>22.1f}{s['seconds']:>14.0f}")  # fmt: skip
    print(json.dumps({str(seed): s for seed, s in runs.items()}))


if __name__ == "__main__":
    main()
