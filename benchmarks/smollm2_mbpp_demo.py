"""A real pretrained model learning to write code by RL on a CPU: SmolLM2-135M-Instruct on MBPP.

At 6-9 % pass@1, RL on MBPP alone gets almost no signal (issue 27: at 4 x 4 samples the
training pass rate was 0.125, 0, 0 and no group had anything to learn from), so the path is the
one a practitioner would take:

1. Warm-up (once): `execrl sft` from the base model on MBPP's train split (ids 601-974), each
   task's prompt exactly as training shows it (the chat template, `Name the function ...`) and
   its reference re-printed by `ast.unparse` (MBPP's references mix tabs, CRLF and trailing
   blanks) in one fenced block, nothing after it.
2. RL: `execrl train --config configs/smollm2-mbpp-grpo.toml` from the warm-up, `run.seed` 0, 1
   and 2 (the warm-up is the same for all three: the spread is RL's).
3. Held-out: MBPP's test split (ids 11-510, all 500 tasks, never trained on), greedy, one sample
   a task, by `execrl eval` as trained (`execrl_eval.json`: the run's own held-out spec, with
   the vLLM engine) for the base model, the warm-up and each seed's final model. Each
   evaluation's results.jsonl says what failed: no code, a syntax error, the function the tests
   call missing (renamed), another runtime error, a wrong answer, a time-out.

Prints a table and writes docs/smollm2_mbpp.png; the last line is JSON, with the load average
before and after each stage. Run from the repository root with vLLM installed
(`scripts/vllm-venv.sh`):

    .venv-vllm/bin/python benchmarks/smollm2_mbpp_demo.py            # everything not yet there
    .venv-vllm/bin/python benchmarks/smollm2_mbpp_demo.py --collect  # only tabulate and plot
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

CONFIG = Path("configs/smollm2-mbpp-grpo.toml")
BASE = "smollm2-135m-instruct"
SEEDS = (0, 1, 2)
HELDOUT = ("mbpp", 500)  # MBPP's test split, all of it
# The warm-up: about 1.3 epochs of MBPP's 374 train-split references, full fine-tuning
WARMUP = {
    "model.path": BASE,
    "model.dtype": "float32",
    "run.steps": 60,
    "run.batch_size": 8,
    "optim.lr": 3e-5,
    "optim.warmup_steps": 5,
    "optim.schedule": "linear",
    "optim.weight_decay": 0.01,
}


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def save_timings(path: Path, timings: dict) -> None:
    """Merged into what the file holds now: seeds run as parallel invocations share it."""
    held = json.loads(path.read_text()) if path.is_file() else {}
    path.write_text(json.dumps({**held, **timings}, indent=1))


def execrl(*args: str) -> None:
    # vLLM drops torch to one thread "for serving" unless OMP_NUM_THREADS says otherwise
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2")}
    subprocess.run([sys.executable, "-m", "execrl.cli", *args], check=True, env=env)


def sets(pairs: dict[str, object]) -> list[str]:
    return [arg for key, value in pairs.items() for arg in ("--set", f"{key}={value}")]


def warmup_pairs(path: Path) -> int:
    """The SFT examples: each train-split task's prompt as `execrl train` shows it, the
    reference in one fenced block."""
    from execrl.models.prompting.prompting import reference_answer, with_named_entry_points
    from execrl.tasks.catalog.registry import load_benchmark

    path.parent.mkdir(parents=True, exist_ok=True)
    tasks = with_named_entry_points(load_benchmark("mbpp-train"))
    with path.open("w") as f:
        for task in tasks:
            answer = reference_answer(task, chat=True)  # one fenced block, re-printed
            messages = [{"role": "user", "content": task.prompt},
                        {"role": "assistant", "content": answer}]  # fmt: skip
            f.write(json.dumps({"messages": messages}) + "\n")
    return len(tasks)


def warmup(out: Path, timings: dict) -> Path:
    final = out / "warmup" / "final"
    if (final / "config.json").is_file():
        return final
    n = warmup_pairs(out / "warmup-pairs.jsonl")
    print(f"smollm2_mbpp_demo: warm-up on {n} MBPP train references", file=sys.stderr)
    started, load = time.monotonic(), load_average()
    more = {"data.train": out / "warmup-pairs.jsonl", "run.out_dir": out, "run.name": "warmup"}
    execrl("sft", *sets({**WARMUP, **more}))
    timings["warmup"] = {"s": round(time.monotonic() - started), "load": [load, load_average()]}
    return final


def with_spec(model: Path, into: Path | None = None) -> Path:
    """A model directory holding the demo config's held-out spec (`execrl_eval.json`), so that
    `execrl eval --model DIR` evaluates it exactly as the runs do. A model execrl did not train
    (the base, the warm-up) gets one: `into` holds links to the model's files beside it."""
    from execrl.rl.config.config import load_config
    from execrl.rl.eval_spec import heldout_spec

    target = model
    if into is not None:
        into.mkdir(parents=True, exist_ok=True)
        for file in model.iterdir():
            link = into / file.name
            if not link.exists() and file.name != "execrl_eval.json":
                link.symlink_to(file.resolve())
        target = into
    config = load_config(CONFIG, [f"model.path={model}"])
    heldout_spec(config).save(target)
    return target


def evaluate(model: Path, out: Path, name: str, timings: dict) -> Path:
    """`execrl eval` of `model` on the held-out tasks, as trained; its out directory."""
    result = out / "heldout" / name
    if (result / "summary.json").is_file():
        return result
    started, load = time.monotonic(), load_average()
    benchmark, limit = HELDOUT
    execrl("eval", "--model", str(model), "--benchmark", benchmark, "--limit", str(limit),
           "--out-dir", str(result), "--json")  # fmt: skip
    timings[f"eval {name}"] = {"s": round(time.monotonic() - started),
                               "load": [load, load_average()]}  # fmt: skip
    return result


def train(out: Path, model: Path, run: str, seed: int, overrides: list[str], timings: dict) -> Path:
    """One seed of RL from `model` as runs/.../`run`; `overrides` are `--set` pairs on top of
    the demo config (a variant of the recipe, named by --tag)."""
    final = out / run / "final"
    if (final / "config.json").is_file():
        return final
    started, load = time.monotonic(), load_average()
    print(f"smollm2_mbpp_demo: {run} (load {load})", file=sys.stderr, flush=True)
    # the held-out evaluation is this script's, once a model (`evaluate`), not the run's twice
    more = {"model.path": model, "run.seed": seed, "run.out_dir": out, "run.name": run,
            "data.heldout": '""'}  # fmt: skip
    extra = [arg for pair in overrides for arg in ("--set", pair)]
    execrl("train", "--config", str(CONFIG), *sets(more), *extra)
    timings[f"train {run}"] = {"s": round(time.monotonic() - started),
                               "load": [load, load_average()], "set": overrides}  # fmt: skip
    return final


FAILURES = ("passed", "no code block", "block never closed (a loop)", "syntax error",
            "function missing (renamed)",
            "other runtime error", "wrong answer", "time-out")  # fmt: skip


def failure_kind(record: dict, entry_point: str) -> str:
    """What a held-out answer got wrong, format first: no fenced code, code that does not
    parse, no function of the name the tests call (a NameError naming it), then the answer's
    correctness."""
    verdict = record["verdict"]
    if record["passed"]:
        return "passed"
    if "```" not in record.get("raw", ""):
        return "no code block"
    if record.get("raw", "").count("```") % 2:
        return "block never closed (a loop)"  # greedy answers that repeat to the token limit
    if verdict == "SYNTAX_ERROR":
        return "syntax error"
    exceptions = " ".join(str(t.get("exception") or "") + str(t.get("message") or "")
                          for t in record.get("tests", []))  # fmt: skip
    said = exceptions + str(record.get("message"))
    if verdict == "RUNTIME_ERROR" and "NameError" in said and f"'{entry_point}'" in said:
        return "function missing (renamed)"
    if verdict == "RUNTIME_ERROR":
        return "other runtime error"
    if verdict == "TIMEOUT":
        return "time-out"
    return "wrong answer"


def breakdown(result: Path) -> dict:
    records = [json.loads(line) for line in (result / "results.jsonl").read_text().splitlines()
               if line.strip()]  # fmt: skip
    from execrl.tasks.catalog.registry import load_benchmark

    entry = {t.id: t.entry_point or "" for t in load_benchmark(HELDOUT[0])}
    kinds = Counter(failure_kind(r, entry[r["task_id"]]) for r in records)
    prose = sum(bool(r.get("raw", "").rsplit("```", 1)[-1].strip()) for r in records
                if r.get("raw", "").count("```") >= 2)  # fmt: skip
    return {"n": len(records), "pass@1": kinds["passed"] / len(records),
            **{k: kinds[k] for k in FAILURES}, "prose after the code": prose}  # fmt: skip


def churn(result: Path, warm: Path) -> str:
    """Which answers a run changed, against the warm-up's: the passes it kept, lost and gained,
    and how many greedy answers are the warm-up's word for word (a small net change can hide a
    large turnover)."""

    def answers(path: Path) -> dict[str, dict]:
        lines = (path / "results.jsonl").read_text().splitlines()
        return {r["task_id"]: r for r in map(json.loads, filter(str.strip, lines))}

    before, after = answers(warm), answers(result)
    passed_before = {t for t, r in before.items() if r["passed"]}
    passed_after = {t for t, r in after.items() if r["passed"]}
    same = sum(before[t].get("raw") == r.get("raw") for t, r in after.items() if t in before)
    return (f"passes kept {len(passed_before & passed_after)}, lost "
            f"{len(passed_before - passed_after)}, new {len(passed_after - passed_before)}; "
            f"{same} of {len(after)} answers the warm-up's word for word")  # fmt: skip


def table(rows: dict[str, dict]) -> str:
    head = "| model | pass@1 | " + " | ".join(FAILURES[1:]) + " | prose after the code |"
    lines = [head, "|" + " --- |" * (len(FAILURES) + 2)]
    for name, row in rows.items():
        cells = [f"{row['pass@1']:.3f}", *(str(row[k]) for k in FAILURES[1:]),
                 str(row["prose after the code"])]  # fmt: skip
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(rows: dict[str, dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.6))
    names = list(rows)
    left.bar(names, [100 * rows[n]["pass@1"] for n in names], color="#4c72b0")
    left.set_ylabel("MBPP test pass@1 (%), greedy, 500 tasks")
    left.set_title("SmolLM2-135M-Instruct: base, SFT warm-up, + GRPO")
    bottom = [0.0] * len(names)
    for kind in FAILURES:
        values = [rows[n][kind] for n in names]
        right.bar(names, values, bottom=bottom, label=kind)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    right.set_ylabel("held-out answers")
    right.set_title("what each answer got wrong")
    right.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    if "warm-up" in rows:  # what RL is measured against
        left.axhline(100 * rows["warm-up"]["pass@1"], color="grey", linestyle="--", linewidth=1,
                     label="the warm-up")  # fmt: skip
        left.legend(fontsize=7, loc="upper left")
    for axis in (left, right):  # each label ends under its own bar
        axis.set_xticks(range(len(names)), names, rotation=35, ha="right",
                        rotation_mode="anchor", fontsize=8)  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("runs/smollm2-mbpp"))
    parser.add_argument("--collect", action="store_true", help="only tabulate and plot")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    parser.add_argument("--tag", default="",
                        help="a recipe variant's name: its runs are TAG-s0, TAG-s1, ... and its "
                             "rows 'GRPO TAG seed N' (give its --set pairs with it)")  # fmt: skip
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a training setting over the demo config",
    )
    parser.add_argument("--plot", type=Path, default=Path("docs/smollm2_mbpp.png"))
    args = parser.parse_args()
    if args.overrides and not args.tag:
        parser.error("--set changes the recipe: name the variant with --tag")
    timings_path = args.out / "timings.json"
    timings = json.loads(timings_path.read_text()) if timings_path.is_file() else {}
    from execrl.models.loading.registry import fetched_dir

    models = {"base": with_spec(fetched_dir(BASE), args.out / "base-model")}
    if not args.collect:
        models["warm-up"] = with_spec(warmup(args.out, timings))
    else:
        models["warm-up"] = args.out / "warmup" / "final"
    results = {}
    for name, model in models.items():
        results[name] = evaluate(model, args.out, name, timings) if not args.collect else (
            args.out / "heldout" / name)  # fmt: skip
        save_timings(timings_path, timings)
    for seed in args.seeds:
        run = f"{args.tag}-s{seed}" if args.tag else f"s{seed}"
        name = f"GRPO {args.tag + ' ' if args.tag else ''}seed {seed}"
        if not args.collect:
            final = train(args.out, models["warm-up"], run, seed, args.overrides, timings)
            results[name] = evaluate(final, args.out, run, timings)
        else:
            results[name] = args.out / "heldout" / run
        save_timings(timings_path, timings)
    if args.collect:  # every variant's finished seeds, after the plain recipe's
        for path in sorted((args.out / "heldout").glob("*-s[0-9]*")):
            tag, seed = path.name.rsplit("-s", 1)
            results.setdefault(f"GRPO {tag} seed {seed}", path)
    rows = {name: breakdown(path) for name, path in results.items()
            if (path / "results.jsonl").is_file()}  # fmt: skip
    print(table(rows))
    for name, path in results.items():
        if name.startswith("GRPO") and name in rows and "warm-up" in rows:
            print(f"{name}: {churn(path, results['warm-up'])}")
    for recipe in dict.fromkeys(n.rsplit(" seed ", 1)[0] for n in rows if n.startswith("GRPO")):
        gains = [rows[n]["pass@1"] - rows["warm-up"]["pass@1"] for n in rows
                 if n.startswith(recipe + " seed ")]  # fmt: skip
        print(f"{recipe} over the warm-up: mean {100 * statistics.mean(gains):+.1f} points, "
              f"min {100 * min(gains):+.1f}, max {100 * max(gains):+.1f} ({len(gains)} seeds)")  # fmt: skip
    plot(rows, args.plot)
    print(json.dumps({"rows": rows, "timings": timings}))


if __name__ == "__main__":
    main()
