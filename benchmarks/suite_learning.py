"""Does each new suite learn? (issue 44, item 5) A short GRPO run on Qwen2.5-Coder-0.5B-Instruct
per suite, held out before and after on tasks no training prompt shows.

For each suite: its config `configs/qwen2.5-coder-0.5b-SUITE.toml` (`execrl train`, LoRA,
bfloat16, vLLM), then `execrl eval` of the merged final model on the held-out tasks, greedy, in
the same dtype. The base model is evaluated the same way once a suite (the same for every seed).

- `testgen`, `diagram`, `web`: the suite's test split; the figure is the verifier's mean score
  in [0, 1] (`verifier_score`: for testgen the gated mix of mutants rejected and coverage, for
  diagram and web the cascade's), beside pass@1 (the maximum score).
- `coder_tester`: MBPP+'s first 64 tasks played as the training episode (`--env coder_tester
  --turns 3`): the coder's pass@1 after its last attempt (and after its first), the tester's
  mean reward.

Each phase is skipped when its output is there (`study_phases`), so an interrupted study resumes.
Writes OUT/study.json, OUT/study.md (the table) and OUT/study.png (training reward by step;
held-out before/after), and study.json into --keep after each phase:

    .venv-vllm/bin/python benchmarks/suite_learning.py --suites testgen --seeds 0 \\
        --out runs/suite-learning --keep docs/results/data/suite-learning
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run, or loaded by path
import study_phases  # noqa: E402
from study_phases import execrl, keep, phase, write  # noqa: E402

MODEL = "qwen2.5-coder-0.5b-instruct"
DTYPE = "bfloat16"


@dataclass(frozen=True)
class Suite:
    config: str
    heldout: str  # --benchmark of `execrl eval`
    eval_args: tuple[str, ...]  # what else the evaluation needs
    max_new_tokens: int


SUITES = {
    # a test suite is a list of near-identical asserts: the loop stop would cut it
    "testgen": Suite("configs/qwen2.5-coder-0.5b-testgen.toml", "testgen:split=test,n=16",
                     ("--repeat-ngram", "0"), 512),
    "diagram": Suite("configs/qwen2.5-coder-0.5b-diagram.toml", "diagram:split=test,n=8", (), 384),
    "web": Suite("configs/qwen2.5-coder-0.5b-web.toml", "web:split=test,n=8", (), 512),
    "coder_tester": Suite("configs/qwen2.5-coder-0.5b-coder-tester.toml", "mbpp+",
                          ("--limit", "64", "--env", "coder_tester", "--turns", "3"), 384),
}  # fmt: skip


def _figures(summary: dict) -> dict:
    """The held-out figures of one evaluation's summary."""
    roles = summary.get("roles")
    if roles:  # coder_tester
        coder = roles["coder"]["pass@1_by_turn"]
        return {"score": coder[-1], "pass": coder[-1], "coder_first": coder[0],
                "tester_reward": roles["tester"]["reward_mean"],
                "tester_components": roles["tester"]["components"]}  # fmt: skip
    return {"score": summary["verifier_score"], "pass": summary["pass@1"]}


def _evaluate(name: str, model: str, out: Path, tag: str) -> dict:
    suite = SUITES[name]
    folder = out / f"{name}-eval-{tag}"  # beside the training run's own folder, not in it
    # greedy, one answer a task, for the base and the trained model alike: a model execrl
    # trained is otherwise evaluated as trained (its held-out samples and temperature)
    cmd = [execrl(), "eval", "--model", model, "--benchmark", suite.heldout, "--engine", "vllm",
           "-n", "1", "--temperature", "0", "--dtype", DTYPE, "--max-new-tokens", str(suite.max_new_tokens), "--workers", "2",
           "--out-dir", str(folder), "--json", *suite.eval_args]  # fmt: skip
    record = phase(f"eval {name} {tag}", cmd, folder.with_suffix(".log"), folder / "summary.json")
    summary = json.loads((folder / "summary.json").read_text())
    return {**_figures(summary), "phase": record, "verdicts": summary.get("verdicts", {})}


def _table(study: dict) -> str:
    lines = ["| suite | held out | seed | score before | score after | pass@1 before | "
             "pass@1 after | train min | eval min | load |",
             "|---" * 10 + "|"]  # fmt: skip
    for name, s in study["suites"].items():
        before = s["before"]
        for seed, r in sorted(s["seeds"].items()):
            after, train = r["after"], r["train"]["phase"]
            loads = (train["load_before"], train["load_after"])
            lines.append(
                f"| {name} | {SUITES[name].heldout} | {seed} | {before['score']:.3f} | "
                f"{after['score']:.3f} | {before['pass']:.3f} | {after['pass']:.3f} | "
                f"{train['minutes']:.0f} | {after['phase']['minutes']:.0f} | "
                f"{min(loads):.1f}-{max(loads):.1f} |"
            )
        if len(s["seeds"]) > 1:
            gains = [r["after"]["score"] - before["score"] for r in s["seeds"].values()]
            lines.append(f"| {name} | mean gain | | | {statistics.mean(gains):+.3f} "
                         f"(spread {max(gains) - min(gains):.3f}) | | | | | |")  # fmt: skip
    return "\n".join(lines) + "\n"


def _plot(study: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(study["suites"])
    fig, axes = plt.subplots(2, len(names), figsize=(4 * len(names), 7), squeeze=False)
    for col, name in enumerate(names):
        s = study["suites"][name]
        top, bottom = axes[0][col], axes[1][col]
        for i, (seed, r) in enumerate(sorted(s["seeds"].items())):
            top.plot(r["train"]["reward"], label=f"seed {seed}", color=f"C{i + 1}")
            bottom.scatter([1], [r["after"]["score"]], color=f"C{i + 1}", zorder=3,
                           label=f"after, seed {seed}")  # fmt: skip
        top.set(title=f"{name}: training reward", xlabel="step", ylabel="reward (mean)")
        top.legend(fontsize=8)
        bottom.bar([0], [s["before"]["score"]], color="C0", width=0.5, label="before")
        bottom.set_xticks([0, 1], ["before", "after"])
        bottom.set_xlim(-0.6, 1.6)
        ylabel = "coder pass@1 (last attempt)" if name == "coder_tester" else "verifier score"
        bottom.set(title=f"held out: {SUITES[name].heldout}", ylabel=ylabel)
        bottom.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suites", nargs="+", choices=sorted(SUITES), default=sorted(SUITES))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--out", type=Path, default=Path("runs/suite-learning"))
    parser.add_argument("--keep", type=Path, default=None,
                        help="a folder (committed) that gets study.json after each phase")  # fmt: skip
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("EXECRL_DATA_DIR", str(Path("../shared/data").resolve()))
    saved = args.out / "study.json"
    study = json.loads(saved.read_text()) if saved.exists() else {"suites": {}}
    study.update(model=MODEL, dtype=DTYPE, steps=args.steps)
    for name in args.suites:
        entry = study["suites"].setdefault(name, {"seeds": {}})
        entry["before"] = _evaluate(name, MODEL, args.out, "before")
        keep(study, args.keep)
        for seed in args.seeds:
            train = study_phases.train(SUITES[name].config, args.out, f"{name}-seed{seed}", seed,
                                        args.steps)  # fmt: skip
            final = str(args.out / f"{name}-seed{seed}" / "final")
            entry["seeds"][str(seed)] = {"train": train,
                                         "after": _evaluate(name, final, args.out, f"seed{seed}")}  # fmt: skip
            write(study, args.out, args.keep, _table, _plot)


if __name__ == "__main__":
    main()
