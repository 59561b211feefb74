"""Code RL on Qwen2.5-Coder-0.5B-Instruct: does execution feedback make it better on held-out
benchmarks? (issue 43, item 1)

For each seed: `execrl train --config configs/qwen2.5-coder-0.5b-mbpp-grpo.toml` (GRPO on
MBPP's train split), then `execrl eval` of its merged final model on HumanEval+ (all 164 tasks)
and MBPP+ (the first --mbpp-limit tasks) with EvalPlus's published protocol (`--prompt
evalplus`, greedy, vLLM). The base model is evaluated the same way once (the same for every
seed). Each phase is skipped when its output is there, so an interrupted study resumes.

Writes OUT/study.json (every figure, with minutes and the load average of each phase),
OUT/study.md (the table) and OUT/study.png (training reward by step; held-out before/after).

    .venv-vllm/bin/python benchmarks/qwen_code_rl.py --seeds 0 1 2 --out runs/qwen-code-rl
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run, or loaded by path
import study_phases  # noqa: E402
from study_phases import execrl, keep, phase, write  # noqa: E402

CONFIG = "configs/qwen2.5-coder-0.5b-mbpp-grpo.toml"
MODEL = "qwen2.5-coder-0.5b-instruct"
BENCHES = ("humaneval+", "mbpp+")
FORMAT_VERDICTS = ("SYNTAX_ERROR", "RUNTIME_ERROR")  # what a format fix removes


def _evaluate(model: str, bench: str, out: Path, limit: int, tag: str, dtype: str) -> dict:
    folder = out / f"{tag}-{bench}"
    cmd = [execrl(), "eval", "--model", model, "--benchmark", bench, "--prompt", "evalplus",
           "--engine", "vllm", "--dtype", dtype, "--max-new-tokens", "768", "--workers", "2",
           "--out-dir", str(folder), "--json"]  # fmt: skip
    if limit:
        cmd += ["--limit", str(limit)]
    record = phase(f"eval {tag} {bench}", cmd, out / f"{tag}-{bench}.log", folder / "summary.json")
    summary = json.loads((folder / "summary.json").read_text())
    results = [json.loads(x) for x in (folder / "results.jsonl").read_text().splitlines()]
    return {"base": summary["base_pass@1"], "plus": summary["pass@1"], "phase": record,
            "verdicts": summary.get("verdicts", {}),
            "passed": {r["task_id"]: bool(r["passed"]) for r in results}}  # fmt: skip


def _flips(before: dict, after: dict) -> dict:
    gained = sorted(t for t, ok in after.items() if ok and not before.get(t))
    lost = sorted(t for t, ok in after.items() if not ok and before.get(t))
    return {"gained": gained, "lost": lost}


def _table(study: dict) -> str:
    lines = ["| | " + " | ".join(f"{b} base | {b} plus" for b in BENCHES) +
             " | mean of the two (plus) | train min | eval min | load |",
             "|---" * (2 * len(BENCHES) + 5) + "|"]  # fmt: skip

    def row(name: str, ev: dict, extra: str) -> str:
        cells = [f"{100 * ev[b]['base']:.1f} | {100 * ev[b]['plus']:.1f}" for b in BENCHES]
        mean = statistics.mean(ev[b]["plus"] for b in BENCHES)
        return f"| {name} | " + " | ".join(cells) + f" | {100 * mean:.1f} | {extra} |"

    before = study["before"]
    minutes = sum(before[b]["phase"]["minutes"] for b in BENCHES)
    lines.append(row("before (base model)", before, f"- | {minutes:.0f} | -"))
    for seed, s in sorted(study["seeds"].items()):
        ev = s["after"]
        minutes = sum(ev[b]["phase"]["minutes"] for b in BENCHES)
        loads = [s["train"]["phase"]["load_before"], s["train"]["phase"]["load_after"]]
        lines.append(row(f"seed {seed}", ev, f"{s['train']['phase']['minutes']:.0f} | "
                         f"{minutes:.0f} | {min(loads):.1f}-{max(loads):.1f}"))  # fmt: skip
    return "\n".join(lines) + "\n"


def _plot(study: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    colour = {seed: f"C{i + 1}" for i, seed in enumerate(sorted(study["seeds"]))}  # C0: before
    for seed, s in sorted(study["seeds"].items()):
        left.plot(range(len(s["train"]["reward"])), s["train"]["reward"], label=f"seed {seed}",
                  color=colour[seed])  # fmt: skip
    left.set(xlabel="step", ylabel="training reward (MBPP train)", title="GRPO on Qwen 0.5B")
    left.legend()
    names = [f"{b} {k}" for b in BENCHES for k in ("base", "plus")]
    before = [100 * study["before"][b][k] for b in BENCHES for k in ("base", "plus")]
    right.bar(range(len(names)), before, width=0.35, label="before", color="C0")
    for i, (seed, s) in enumerate(sorted(study["seeds"].items())):
        after = [100 * s["after"][b][k] for b in BENCHES for k in ("base", "plus")]
        right.scatter([x + 0.35 for x in range(len(names))], after, marker="o",
                      label=f"after, seed {seed}", zorder=3 + i, color=colour[seed])  # fmt: skip
    right.set_xticks(range(len(names)), names, rotation=20)
    right.set(ylabel="pass@1 (%) greedy, EvalPlus protocol", title="held out")
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--config", default=CONFIG, help="the training recipe")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--dtype", default="float32",
                        help="the evaluations' dtype: the recipe's model.dtype, so that the base "
                             "model is evaluated as its training starts")  # fmt: skip
    parser.add_argument("--keep", type=Path, default=None,
                        help="a folder (committed) that gets study.json after each phase: a "
                             "VM's /root does not outlive it")  # fmt: skip
    parser.add_argument("--mbpp-limit", type=int, default=64, help="MBPP+ tasks (0: all 378)")
    parser.add_argument("--out", type=Path, default=Path("runs/qwen-code-rl"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("EXECRL_DATA_DIR", str(Path("../shared/data").resolve()))
    limits = {"humaneval+": 0, "mbpp+": args.mbpp_limit}
    study: dict = {"config": args.config, "steps": args.steps, "dtype": args.dtype,
                   "limits": limits, "seeds": {}}  # fmt: skip
    study["before"] = {b: _evaluate(MODEL, b, args.out, limits[b], "before", args.dtype)
                       for b in BENCHES}  # fmt: skip
    keep(study, args.keep)
    for seed in args.seeds:
        train = study_phases.train(args.config, args.out, f"seed{seed}", seed, args.steps)
        final = str(args.out / f"seed{seed}" / "final")
        after = {b: _evaluate(final, b, args.out, limits[b], f"seed{seed}", args.dtype)
                 for b in BENCHES}  # fmt: skip
        flips = {b: _flips(study["before"][b]["passed"], after[b]["passed"]) for b in BENCHES}
        study["seeds"][str(seed)] = {"train": train, "after": after, "flips": flips}
        write(study, args.out, args.keep, _table, _plot)


if __name__ == "__main__":
    main()
