"""Two findings of the seed papers, reproduced at small scale on the embedded default.

(a) A pass-rate reward (fraction of tests passed) against a binary one (all tests pass).
(b) A verifier with 20 % symmetric label noise against a clean one (binary reward in both).

Each arm is `execrl train` with `run.seed` 0, 1 and 2 (other training and held-out tasks, same
model); held-out pass@1 before and after comes from each run's summary.json. Prints a table
(mean, min and max of the lift over seeds), writes a plot, and its last line is JSON.

    python benchmarks/seed_findings.py --out runs/findings            # train all 9 runs
    python benchmarks/seed_findings.py --out runs/findings --collect  # only tabulate them
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ARMS: dict[str, list[str]] = {
    "binary": ["rl.reward=pass"],
    "pass_fraction": ["rl.reward=pass_fraction"],
    "binary_noise20": [
        "rl.reward=pass",
        "reward.noise.kind=symmetric",
        "reward.noise.rate=0.2",
    ],
}
SEEDS = (0, 1, 2)


def run_dir(out: Path, arm: str, seed: int) -> Path:
    return out / f"{arm}-s{seed}"


def train(out: Path, arm: str, seed: int) -> None:
    sets = [*ARMS[arm], f"run.seed={seed}", f"run.out_dir={run_dir(out, arm, seed)}"]
    if "noise" in arm:
        sets.append(f"reward.noise.seed={seed}")
    command = [sys.executable, "-m", "execrl.cli", "train"]
    for item in sets:
        command += ["--set", item]
    print(f"seed_findings: {arm} seed {seed}", file=sys.stderr, flush=True)
    subprocess.run(command, check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})


def summary(out: Path, arm: str, seed: int) -> dict:
    found = sorted(run_dir(out, arm, seed).glob("*/summary.json"))
    if not found:
        raise SystemExit(f"seed_findings: no summary.json under {run_dir(out, arm, seed)}")
    return json.loads(found[-1].read_text())


def rewards(out: Path, arm: str, seed: int) -> list[float]:
    metrics = sorted(run_dir(out, arm, seed).glob("*/metrics.jsonl"))[-1]
    rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    return [row.get("pass_rate", row.get("reward_mean", 0.0)) for row in rows]


def plot(table: dict[str, dict], out: Path, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for x, (arm, row) in enumerate(table.items()):
        left.bar(x, row["after_mean"], color="tab:blue", alpha=0.5)
        left.bar(x, row["before_mean"], color="tab:gray", alpha=0.7, width=0.4)
        left.scatter([x] * len(row["after"]), row["after"], color="tab:blue", zorder=3)
        curves = [rewards(out, arm, seed) for seed in SEEDS]
        n = min(len(c) for c in curves)
        mean = [statistics.fmean(c[i] for c in curves) for i in range(n)]
        window = 10
        smooth = [statistics.fmean(mean[max(0, i - window + 1) : i + 1]) for i in range(n)]
        right.plot(range(1, n + 1), smooth, label=arm)
    left.set_xticks(range(len(table)), list(table), rotation=10)
    left.set_ylabel("held-out pass@1")
    left.set_title("gray: before, blue: after (mean), dots: seeds", fontsize=9)
    right.set_xlabel("step")
    right.set_ylabel("training pass rate (clean tests)")
    right.set_title("mean of 3 seeds, 10-step running mean", fontsize=9)
    right.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/findings"))
    parser.add_argument("--collect", action="store_true", help="tabulate existing runs only")
    parser.add_argument("--plot", type=Path, default=Path("docs/seed_findings.png"))
    args = parser.parse_args()
    table: dict[str, dict] = {}
    for arm in ARMS:
        before, after = [], []
        for seed in SEEDS:
            if not args.collect:
                train(args.out, arm, seed)
            s = summary(args.out, arm, seed)
            before.append(s["heldout_pass@1_before"])
            after.append(s["heldout_pass@1_after"])
        lifts = [a - b for a, b in zip(after, before, strict=True)]
        table[arm] = {
            "before": before,
            "after": after,
            "before_mean": statistics.fmean(before),
            "after_mean": statistics.fmean(after),
            "lift_mean": statistics.fmean(lifts),
            "lift_min": min(lifts),
            "lift_max": max(lifts),
        }
    print(f"{'arm':16} {'before':>8} {'after':>8} {'lift':>7} {'min':>7} {'max':>7}  after by seed")
    for arm, row in table.items():
        seeds = " ".join(f"{a:.3f}" for a in row["after"])
        print(
            f"{arm:16} {row['before_mean']:8.3f} {row['after_mean']:8.3f} "
            f"{row['lift_mean']:+7.3f} {row['lift_min']:+7.3f} {row['lift_max']:+7.3f}  {seeds}"
        )
    plot(table, args.out, args.plot)
    print(json.dumps(table))


if __name__ == "__main__":
    main()
