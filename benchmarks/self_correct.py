"""Issue 17's demonstration: RL in the self-correction environment on the embedded default.

1. Warm-up (with --warmup, once): `execrl eval --model default --env self_correct --turns 2
   --corrections` on 800 train-split tasks (4 episodes each, T=1.0) writes each failed attempt's
   conversation with the reference as its completion; `execrl sft` trains the embedded default
   on them (WARMUP). Without --warmup, RL starts from the embedded default itself.
2. RL: `execrl train --config configs/self-correct.toml --set run.seed=S` for seeds 0, 1, 2 (two
   attempts, feedback from the visible tests after a failed one), plus any --set given here.
3. The feedback control (with --control): `execrl eval` of the starting model and of each
   trained one on the run's held-out tasks, with full feedback and with the verdict only
   (`--feedback verdict`): what the second turn gains from reading the feedback, beyond
   retrying.

The summary's held-out pass@1 after each turn, before and after training, is tabulated: what the
second turn adds (turn 2 - turn 1) before and after. Prints a table, writes a plot; the last
line is JSON, with the load average before and after each run.

    python benchmarks/self_correct.py --out runs/self-correct                     # no warm-up
    python benchmarks/self_correct.py --out runs/sc-warm --warmup --control \\
        --set credit.from_turn=2 --seeds 0 1 2 3 4       # docs/results/self-correction.md
    python benchmarks/self_correct.py --out runs/sc-warm --collect                # tabulate only

SmolLM2 (docs/results/smollm2-self-correction.md): the correction warm-up from
the MBPP SFT warm-up, on MBPP's train split, its targets the reference in one fenced block:

    .venv-vllm/bin/python benchmarks/self_correct.py --config configs/smollm2-self-correct.toml \
        --warmup --warmup-from runs/smollm2-mbpp/warmup/final --correction-tasks mbpp-train \
        --correction-sampling 1 0.8 --warmup-set run.steps=30 --warmup-set run.batch_size=8 \
        --warmup-set optim.lr=3e-5 --warmup-set optim.warmup_steps=3 --control --seeds 0 \
        --out runs/smollm2-sc-warm --plot docs/smollm2_self_correct_warm.png
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

SEEDS = (0, 1, 2)
CONFIG = Path(__file__).resolve().parent.parent / "configs" / "self-correct.toml"
# Correction examples: the embedded default's failed attempts on train-split tasks (never the
# held-out test split), sampled hot so that most tasks fail at least once
CORRECTION_TASKS = "synthetic:split=train,difficulty=1,n=800,seed=100"
CORRECTION_SAMPLING = ("-n", "4", "--temperature", "1.0")
# The warm-up: 60 steps of 16 examples (about half the 2,041 corrections once), lr 1e-3
WARMUP = {
    "run.steps": 60,
    "run.batch_size": 16,
    "optim.lr": 1e-3,
    "optim.warmup_steps": 10,
    "optim.schedule": "linear",
}


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def execrl(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "execrl.cli", *args]
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    return subprocess.run(command, check=True, env=env, stdout=subprocess.PIPE, text=True)


def warmup(out: Path, config: Path, base: str, tasks: str, sampling: tuple[str, ...],
           settings: dict[str, str]) -> Path:  # fmt: skip
    """The warm-up model's directory, built unless it is there: `base`'s failed attempts on
    `tasks` (train split) with the reference as the correction, then `execrl sft` on them. The
    directory gets the run config's held-out spec, so that the control evaluates it as RL does."""
    final = out / "warmup" / "final"
    if (final / "config.json").is_file():
        return final
    corrections = out / "corrections"
    spec = f"{base}/execrl_eval.json"  # a model execrl trained: sampled with its run's engine
    if not (corrections / "corrections.jsonl").is_file():
        print(f"self_correct: correction examples from {tasks} (load {load_average()})",
              file=sys.stderr, flush=True)  # fmt: skip
        limit = ("--limit", "0") if Path(spec).is_file() else ()  # not the run's held-out count
        execrl("eval", "--model", base, "--benchmark", tasks, "--env", "self_correct",
               "--turns", "2", *sampling, *limit, "--corrections", "--out-dir", str(corrections))  # fmt: skip
    print(f"self_correct: warm-up, execrl sft on the corrections (load {load_average()})",
          file=sys.stderr, flush=True)  # fmt: skip
    sets = {**WARMUP, **settings, "model.path": base,
            "data.train": corrections / "corrections.jsonl", "run.out_dir": out,
            "run.name": "warmup"}  # fmt: skip
    execrl("sft", *[arg for key, value in sets.items() for arg in ("--set", f"{key}={value}")])
    from execrl.rl.config.config import load_config
    from execrl.rl.eval_spec import heldout_spec

    heldout_spec(load_config(config, [f"model.path={final}"])).save(final)
    return final


def train(out: Path, config: Path, model: str, seed: int, extra: list[str]) -> dict:
    before = load_average()
    print(f"self_correct: seed {seed} (load {before})", file=sys.stderr, flush=True)
    sets = [f"model.path={model}", f"run.seed={seed}", f"run.out_dir={out}", f"run.name=seed{seed}"]
    execrl("train", "--config", str(config), *[a for s in sets + extra for a in ("--set", s)])
    return {"seed": seed, "load_before": before, "load_after": load_average()}


def summary(out: Path, seed: int) -> dict:
    path = out / f"seed{seed}" / "summary.json"
    if not path.is_file():
        raise SystemExit(f"self_correct: no {path}; train it first (without --collect)")
    return json.loads(path.read_text())


def control(out: Path, model: Path, name: str, spec_from: Path, evaluate: bool) -> dict:
    """Held-out pass@1 by turn with full feedback and with the verdict only, sampled as the
    run's held-out evaluation (its tasks, samples, temperature and token budget)."""
    spec = json.loads((spec_from / "execrl_eval.json").read_text())
    if not (model / "execrl_eval.json").is_file():  # the warm-up: prompt it as RL did
        shutil.copy(spec_from / "execrl_eval.json", model / "execrl_eval.json")
    rates = {}
    for feedback in ("full", "verdict"):
        result = out / "control" / f"{name}-{feedback}" / "summary.json"
        if evaluate and not result.is_file():
            execrl("eval", "--model", str(model), "--benchmark", spec["benchmark"],
                   "--env", "self_correct", "--turns", "2", "--feedback", feedback,
                   "-n", str(spec["samples_per_task"]), "--temperature", str(spec["temperature"]),
                   "--top-p", str(spec["top_p"]), "--max-new-tokens", str(spec["max_new_tokens"]),
                   "--out-dir", str(result.parent))  # fmt: skip
        if not result.is_file():
            raise SystemExit(f"self_correct: no {result}; run without --collect first")
        rates[feedback] = json.loads(result.read_text())["pass@1_by_turn"]
    return rates


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


def reading(rows: dict) -> None:
    """What the second turn gets from reading the feedback (full minus verdict-only, points),
    for the start and each seed after RL."""

    def share(c: dict) -> float:
        return 100 * ((c["full"][1] - c["full"][0]) - (c["verdict"][1] - c["verdict"][0]))

    after = [share(r["control"]) for k, r in rows.items() if k != "control_start"]
    start = f"start {share(rows['control_start']):+.1f}, " if "control_start" in rows else ""
    print(f"from reading the feedback: {start}after " + ", ".join(f"{a:+.1f}" for a in after))


def plot(rows: dict, path: Path) -> None:
    """Left: pass@1 by turn before (dashed) and after RL. Right, with --control: what the second
    turn adds with full feedback and with the verdict only, for the start and each seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = {k: v for k, v in rows.items() if k != "control_start"}
    controls = {f"seed {k}": v["control"] for k, v in runs.items() if "control" in v}
    if "control_start" in rows:
        controls = {"start": rows["control_start"], **controls}
    fig, axes = plt.subplots(1, 2 if controls else 1, figsize=(12 if controls else 7, 4))
    ax = axes[0] if controls else axes
    for i, (seed, r) in enumerate(runs.items()):
        turns = range(1, len(r["before"]) + 1)
        ax.plot(turns, r["before"], marker="o", linestyle="--", color=f"C{i}",
                label=f"seed {seed} before")  # fmt: skip
        ax.plot(turns, r["after"], marker="o", color=f"C{i}", label=f"seed {seed} after")
    ax.set_xticks(list(turns))
    ax.set_xlabel("turn (attempts so far)")
    ax.set_ylabel("held-out pass@1")
    ax.set_title("Held-out pass@1 after each turn, before and after RL")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    if controls:
        right = axes[1]
        for x, c in enumerate(controls.values()):
            for offset, feedback, color in (
                (-0.2, "full", "tab:blue"),
                (0.2, "verdict", "tab:gray"),
            ):
                gain = 100 * (c[feedback][1] - c[feedback][0])
                label = f"{feedback} feedback" if x == 0 else None
                right.bar(x + offset, gain, width=0.4, color=color, label=label)
        right.set_xticks(range(len(controls)), list(controls))
        right.set_ylabel("turn 2 adds (points of pass@1)")
        right.set_title("Feedback control: full feedback vs the verdict only")
        right.grid(alpha=0.3, axis="y")
        right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/self-correct"))
    parser.add_argument("--config", type=Path, default=CONFIG, help="the execrl train config")
    parser.add_argument("--model", default="default", help="the starting model (without --warmup)")
    parser.add_argument("--warmup", action="store_true", help="start from a correction warm-up")
    parser.add_argument("--warmup-from", default="default", help="the warm-up's base model")
    parser.add_argument("--correction-tasks", default=CORRECTION_TASKS, help="train-split tasks")
    parser.add_argument("--correction-sampling", nargs=2, metavar=("N", "T"),
                        default=CORRECTION_SAMPLING[1::2], help="episodes a task, temperature")  # fmt: skip
    parser.add_argument("--warmup-set", action="append", default=[], help="passed to execrl sft")
    parser.add_argument("--control", action="store_true", help="also the verdict-only control")
    parser.add_argument("--set", action="append", default=[], help="passed to execrl train")
    parser.add_argument("--collect", action="store_true", help="only tabulate finished runs")
    parser.add_argument("--plot", type=Path, default=Path("docs/self_correct.png"))
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS), help="RL seeds")
    args = parser.parse_args()
    seeds = tuple(args.seeds)
    model = args.model
    start = args.out / "warmup" / "final"
    if args.warmup and not args.collect:
        n, temperature = args.correction_sampling
        sampling = ("-n", n, "--temperature", temperature)
        settings = dict(item.split("=", 1) for item in args.warmup_set)
        model = str(warmup(args.out, args.config, args.warmup_from, args.correction_tasks,
                           sampling, settings))  # fmt: skip
        if args.control:  # what the warm-up alone does to the second turn, before any RL
            control(args.out, start, "start", start, evaluate=True)
    runs = [] if args.collect else seeds
    loads = [train(args.out, args.config, model, seed, args.set) for seed in runs]
    rows = table(args.out, seeds)
    if args.control:
        spec_from = args.out / f"seed{seeds[0]}" / "final"
        if start.is_dir():
            rows["control_start"] = control(args.out, start, "start", spec_from, not args.collect)
        for seed in seeds:
            final = args.out / f"seed{seed}" / "final"
            rows[seed]["control"] = control(args.out, final, f"seed{seed}", final, not args.collect)
        print(
            json.dumps({k: (v if k == "control_start" else v["control"]) for k, v in rows.items()})
        )
        reading(rows)
    plot(rows, args.plot)
    print(json.dumps({"rows": {str(k): v for k, v in rows.items()}, "loads": loads}))


if __name__ == "__main__":
    main()
