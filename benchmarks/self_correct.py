"""Issue 17's demonstration: RL in the self-correction environment on the embedded default.

Each seed is `execrl train --config configs/self-correct.toml --set run.seed=S` (two attempts,
feedback from the visible tests after a failed one); the summary's held-out pass@1 after each
turn, before and after training, is tabulated: what the second turn adds (turn 2 - turn 1)
before and after. Prints a table, writes a plot, and its last line is JSON.

    python benchmarks/self_correct.py --out runs/self-correct            # train the 3 seeds
    python benchmarks/self_correct.py --out runs/self-correct --collect  # only tabulate them
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

SEEDS = (0, 1, 2)
CONFIG = Path(__file__).resolve().parent.parent / "configs" / "self-correct.toml"


def train(out: Path, seed: int) -> None:
    command = [sys.executable, "-m", "execrl.cli", "train", "--config", str(CONFIG),
               "--set", f"run.seed={seed}", "--set", f"run.out_dir={out}",
               "--set", f"run.name=seed{seed}"]  # fmt: skip
    print(f"self_correct: seed {seed}", file=sys.stderr, flush=True)
    subprocess.run(command, check=True)


def summary(out: Path, seed: int) -> dict:
    path = out / f"seed{seed}" / "summary.json"
    if not path.is_file():
        raise SystemExit(f"self_correct: no {path}; train it first (without --collect)")
    return json.loads(path.read_text())


def table(out: Path, seeds: tuple[int, ...]) -> dict:
    rows = {}
    for seed in seeds:
        s = summary(out, seed)
        before, after = s["heldout_pass@1_by_turn_before"], s["heldout_pass@1_by_turn_after"]
        rows[seed] = {"before": before, "after": after,
                      "second_turn_before": round(before[1] - before[0], 4),
                      "second_turn_after": round(after[1] - after[0], 4)}  # fmt: skip
    print("seed  by turn before     by turn after      turn 2 adds: before  after")
    for seed, r in rows.items():
        print(f"{seed:>4}  {r['before']!s:18} {r['after']!s:18} "
              f"{100 * r['second_turn_before']:+12.1f} {100 * r['second_turn_after']:+6.1f}")  # fmt: skip
    for key in ("second_turn_before", "second_turn_after"):
        values = [r[key] for r in rows.values()]
        print(f"{key}: mean {100 * statistics.fmean(values):+.1f} points, "
              f"min {100 * min(values):+.1f}, max {100 * max(values):+.1f}")  # fmt: skip
    return rows


def plot(rows: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for i, (seed, r) in enumerate(rows.items()):
        turns = range(1, len(r["before"]) + 1)
        ax.plot(turns, r["before"], marker="o", linestyle="--", color=f"C{i}",
                label=f"seed {seed} before")  # fmt: skip
        ax.plot(turns, r["after"], marker="o", color=f"C{i}", label=f"seed {seed} after")
    ax.set_xticks(list(turns))
    ax.set_xlabel("turn (attempts so far)")
    ax.set_ylabel("held-out pass@1")
    ax.set_title("Self-correction: held-out pass@1 after each turn, before and after RL")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/self-correct"))
    parser.add_argument("--collect", action="store_true", help="only tabulate finished runs")
    parser.add_argument("--plot", type=Path, default=Path("docs/self_correct.png"))
    args = parser.parse_args()
    if not args.collect:
        for seed in SEEDS:
            train(args.out, seed)
    rows = table(args.out, SEEDS)
    plot(rows, args.plot)
    print(json.dumps({str(seed): r for seed, r in rows.items()}))


if __name__ == "__main__":
    main()
