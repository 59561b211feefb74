"""The embedded default learning on a verifier suite: SQL queries graded by the `sql` verifier.

1. Warm-up (once): `execrl sft` from the embedded default on the reference queries of the 600
   train-split tasks the RL config trains on (WARMUP_TASKS), prompt -> "```\\nQUERY```", a short
   run, so that held-out pass@1 starts low but not at zero (the embedded default writes Python
   only: none of its completions is a query, and RL would have nothing to reinforce).
2. RL: `execrl train --config configs/sql-demo.toml` with `run.seed` 0, 1 and 2 from that model;
   held-out pass@1 on the test split before and after comes from each run's summary.json (the
   sql verifier's score is 0 or 1, so the mean verifier score is the same figure).
3. By level: `execrl eval` of the warm-up and of each trained model on the test split's 22
   tasks of each level (4 samples at the held-out temperature), to see where a change comes from.

Prints a table (mean, min and max of the lift over seeds, and pass@1 by level) and writes a
plot; the last line is JSON, with the load average before and after each run.

    nice -n 5 python benchmarks/sql_demo.py                      # warm-up, 3 runs, by level
    python benchmarks/sql_demo.py --collect                      # only tabulate and plot them

A pretrained model: `--warmup-from` names it (its warm-up is gentler, in its chat template) and
`--config` the RL config (SmolLM2-135M-Instruct, with vLLM: `scripts/vllm-venv.sh`); with
`--no-warmup` the runs start from the config's own model.path:

    .venv-vllm/bin/python benchmarks/sql_demo.py --config configs/smollm2-sql.toml \\
        --warmup-from smollm2-135m-instruct --out runs/smollm2-sql \\
        --plot docs/smollm2_sql.png --no-by-level
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

CONFIG = Path("configs/sql-demo.toml")
# The warm-up's tasks: the config's 600 training tasks (241 distinct prompts). A warm-up on the
# first 120 of them memorised the level-2 queries, learnt no join (level 3: 0.00 held-out, so
# nothing for RL to reinforce there) and RL then lost level 2 (docs/results/sql-embedded-default.md);
# on all 600 it writes joins with held-out pass@1 0.10 and pass@4 0.32 at T=0.2.
WARMUP_TASKS = "sql:n=200"
SEEDS = (0, 1, 2)
LEVELS = (1, 2, 3)
# The warm-up: the embedded default's own SFT recipe (lr 3e-3, batch 16, 20 warm-up steps, then
# a linear decay) for 150 steps (on 120 tasks, 60 steps gave 0.0 held-out: no completion closed
# its fence)
WARMUP = {
    "run.steps": 150,
    "run.batch_size": 16,
    "optim.lr": 3e-3,
    "optim.warmup_steps": 20,
    "optim.schedule": "linear",
    "optim.weight_decay": 0.01,
}


# A pretrained chat model's warm-up (`--warmup-from`): it writes queries already, so a short,
# gentle pass over references in its chat template teaches the suite's schema and the answer's
# form (SmolLM2-135M-Instruct: greedy pass@1 0.00 before, its queries naming columns the tables
# do not have). The suite has three question templates a level, so a warm-up decides how much is
# left for RL: SmolLM2 after 40 steps on all three levels' references had held-out pass@1 1.000
# (nothing left); after 20 steps on level 1 only, 0.333 (level 1 solved), and RL then found no
# grouping or join query at all (12 steps, 8 samples a prompt at T 0.8: every group of levels 2
# and 3 all wrong, every group of level 1 all right, so no group carried an advantage and held-out
# stayed 0.333). Its demo warms up for 6 steps on all three levels: partly right on each.
PRETRAINED_WARMUP = {
    "model.dtype": "float32",
    "run.steps": 6,
    "run.batch_size": 8,
    "optim.lr": 3e-5,
    "optim.warmup_steps": 2,
    "optim.schedule": "linear",
    "optim.weight_decay": 0.01,
}


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def execrl(*args: str) -> None:
    command = [sys.executable, "-m", "execrl.cli", *args]
    subprocess.run(command, check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})


def warmup(out: Path, base: str = "default", tasks: str = WARMUP_TASKS) -> Path:
    """The SFT warm-up's model directory, trained from `base` unless it is there: the embedded
    default continues the raw prompt; another model gets each example in its chat template."""
    from execrl.tasks.catalog.registry import load_benchmark

    final = out / "warmup" / "final"
    if (final / "config.json").is_file():
        return final
    pairs = out / "warmup-pairs.jsonl"
    pairs.parent.mkdir(parents=True, exist_ok=True)
    with pairs.open("w") as f:
        for task in load_benchmark(tasks):
            if base == "default":
                completion = f"\n```\n{task.reference}```"
                f.write(json.dumps({"prompt": task.prompt, "completion": completion}) + "\n")
            else:
                answer = {"role": "assistant", "content": f"```\n{task.reference}```"}
                messages = [{"role": "user", "content": task.prompt}, answer]
                f.write(json.dumps({"messages": messages}) + "\n")
    print(f"sql_demo: warm-up on {tasks}'s references", file=sys.stderr, flush=True)
    recipe = WARMUP if base == "default" else {**PRETRAINED_WARMUP, "model.path": base}
    sets = {**recipe, "data.train": pairs, "run.out_dir": out, "run.name": "warmup"}
    execrl("sft", *[arg for key, value in sets.items() for arg in ("--set", f"{key}={value}")])
    return final


def train(out: Path, model: Path | None, seed: int, config: Path = CONFIG) -> dict:
    """One run (model None: the config's own model.path), unless its summary is there."""
    before = load_average()
    if (out / f"s{seed}" / "summary.json").is_file():
        return {"seed": seed, "load_before": None, "load_after": None}
    print(f"sql_demo: seed {seed} (load {before})", file=sys.stderr, flush=True)
    sets = [f"run.seed={seed}", f"run.out_dir={out}", f"run.name=s{seed}"]
    sets += [f"model.path={model}"] if model is not None else []
    execrl("train", "--config", str(config), *[a for s in sets for a in ("--set", s)])
    return {"seed": seed, "load_before": before, "load_after": load_average()}


def summary(out: Path, seed: int) -> dict:
    path = out / f"s{seed}" / "summary.json"
    if not path.is_file():
        raise SystemExit(f"sql_demo: no {path}; run without --collect first")
    return json.loads(path.read_text())


def by_level(out: Path, model: Path, name: str, evaluate: bool) -> list[float]:
    """Pass@1 of `model` on the held-out source's tasks of each level, as the run measures it
    (the config's held-out temperature, samples and token budget, top-p 1), by `execrl eval`."""
    from execrl.rl.config.config import load_config

    config = load_config(CONFIG)
    rates = []
    for level in LEVELS:
        result = out / "by-level" / f"{name}-L{level}"
        if evaluate and not (result / "summary.json").is_file():
            benchmark = f"{config.data.heldout},difficulty={level}"
            sampling = config.sampling
            execrl(
                "eval", "--model", str(model), "--benchmark", benchmark,
                "-n", str(config.data.heldout_samples),
                "--temperature", str(sampling.heldout_temperature), "--top-p", "1.0",
                "--max-new-tokens", str(sampling.max_new_tokens), "--out-dir", str(result),
            )  # fmt: skip
        if not (result / "summary.json").is_file():
            raise SystemExit(f"sql_demo: no {result}/summary.json; run without --collect first")
        rates.append(json.loads((result / "summary.json").read_text())["pass@1"])
    return rates


def pass_rates(out: Path, seed: int) -> list[float]:
    lines = (out / f"s{seed}" / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line)["pass_rate"] for line in lines if line.strip()]


def plot(before: list[float], after: list[float], levels: dict[str, list[float]], out: Path,
         path: Path) -> None:  # fmt: skip
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if levels:
        fig, (left, middle, right) = plt.subplots(1, 3, figsize=(14, 4))
    else:  # --no-by-level
        fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for x, seed in enumerate(SEEDS):
        left.bar(x - 0.2, before[x], width=0.4, color="tab:gray", label="before" if x == 0 else "")
        left.bar(x + 0.2, after[x], width=0.4, color="tab:blue", label="after" if x == 0 else "")
        curve = pass_rates(out, seed)
        window = 10
        smooth = [
            statistics.fmean(curve[max(0, i - window + 1) : i + 1]) for i in range(len(curve))
        ]
        right.plot(range(1, len(curve) + 1), smooth, label=f"seed {seed}")
    left.set_xticks(range(len(SEEDS)), [f"seed {s}" for s in SEEDS])
    left.set_ylabel("held-out pass@1 (sql test split)")
    left.set_title("before and after RL, per seed", fontsize=9)
    left.set_ylim(0, 1)
    left.legend(loc="upper left")
    width = 0.8 / (1 + len(SEEDS))
    for i, (name, rates) in enumerate(levels.items()):  # nothing without levels
        xs = [x - 0.4 + width * (i + 0.5) for x in range(len(LEVELS))]
        color = "tab:gray" if name == "warm-up" else None
        middle.bar(xs, rates, width=width, label=name, color=color)
    if levels:
        middle.set_xticks(range(len(LEVELS)), [f"level {level}" for level in LEVELS])
        middle.set_ylabel("held-out pass@1")
        middle.set_title("by level: the warm-up and each trained seed", fontsize=9)
        middle.set_ylim(0, 1.05)
        middle.legend(loc="upper left", fontsize=8)
    right.set_xlabel("step")
    right.set_ylabel("training pass rate")
    right.set_title("10-step running mean", fontsize=9)
    right.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/sql-demo"))
    parser.add_argument("--collect", action="store_true", help="tabulate existing runs only")
    parser.add_argument("--plot", type=Path, default=Path("docs/sql_demo.png"))
    parser.add_argument("--config", type=Path, default=CONFIG)
    parser.add_argument("--no-warmup", dest="warmup", action="store_false",
                        help="train from the config's model.path, with no SFT warm-up first")  # fmt: skip
    parser.add_argument("--warmup-from", default="default",
                        help="the warm-up's base model (default: the embedded default)")  # fmt: skip
    parser.add_argument("--warmup-tasks", default=WARMUP_TASKS,
                        help=f"the tasks whose references the warm-up learns ({WARMUP_TASKS})")  # fmt: skip
    parser.add_argument("--no-by-level", dest="by_level", action="store_false",
                        help="skip the by-level evaluations of the warm-up and each seed")  # fmt: skip
    args = parser.parse_args()
    loads = []
    if not args.collect:
        model = warmup(args.out, args.warmup_from, args.warmup_tasks) if args.warmup else None
        loads = [train(args.out, model, seed, args.config) for seed in SEEDS]
    summaries = [summary(args.out, seed) for seed in SEEDS]
    before = [s["heldout_pass@1_before"] for s in summaries]
    after = [s["heldout_pass@1_after"] for s in summaries]
    lifts = [a - b for a, b in zip(after, before, strict=True)]
    print(f"{'seed':>4} {'before':>8} {'after':>8} {'lift':>7} {'seconds':>8}")
    for seed, s, lift in zip(SEEDS, summaries, lifts, strict=True):
        print(f"{seed:>4} {before[seed]:8.3f} {after[seed]:8.3f} {lift:+7.3f} {s['seconds']:8.1f}")
    print(
        f"mean {statistics.fmean(before):8.3f} {statistics.fmean(after):8.3f} "
        f"{statistics.fmean(lifts):+7.3f}  (lift min {min(lifts):+.3f}, max {max(lifts):+.3f})"
    )
    evaluate = not args.collect
    levels = {}
    if args.by_level:
        levels = {"warm-up": by_level(args.out, args.out / "warmup" / "final", "warmup", evaluate)}
        for seed in SEEDS:
            final = args.out / f"s{seed}" / "final"
            levels[f"seed {seed}"] = by_level(args.out, final, f"s{seed}", evaluate)
        print("pass@1 by level " + "  ".join(f"{'level ' + str(level):>8}" for level in LEVELS))
        for name, rates in levels.items():
            print(f"{name:>15} " + "  ".join(f"{rate:8.3f}" for rate in rates))
    plot(before, after, levels, args.out, args.plot)
    print(json.dumps({"before": before, "after": after, "lifts": lifts, "by_level": levels,
                      "loads": loads, "load_at_end": load_average()}))  # fmt: skip


if __name__ == "__main__":
    main()
