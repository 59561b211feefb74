"""SmolLM2-135M-Instruct's greedy pass@1 on HumanEval, HumanEval+, MBPP and MBPP+ as `execrl eval`
gives it (issue 27, item 3), with the share of answers that are not a program or do not parse,
and of those that ran to the token limit.

Each generation is one `execrl eval` run (greedy, the stop rules on: the end of the answer's code
block and `--repeat-ngram 32`), resumable: a run that finds its samples continues them. The plus
variants are graded from the same samples with `execrl eval-samples`, without generating again:

- HumanEval+ has HumanEval's prompts and task ids, so this is EvalPlus's own protocol;
- MBPP+ is graded on the MBPP test-split tasks it shares (EvalPlus keeps 378 MBPP tasks, 224 of
  them in ids 11-510), from answers to MBPP's prompt (prose and three asserts) rather than
  EvalPlus's (a docstring with one assert): the tests are MBPP+'s, the prompt is not.
  `--mbpp-plus-native N` also generates from MBPP+'s own prompts for its first N tasks.

The table's columns, per run: pass@1; `no code`: no program could be taken from the answer
(no fenced block, or one opened and never closed), so the empty program ran; `syntax`: the
program did not parse (the sandbox's SYNTAX_ERROR); `at limit`: the answer, tokenized again, is
within 8 tokens of `--max-new-tokens` (it ran to the limit rather than to the end of its code
block, eos or a repeated 32-gram).

    nice -n 5 .venv/bin/python benchmarks/smollm2_benchmarks.py --out /tmp/smollm2-bench
    nice -n 5 .venv/bin/python benchmarks/smollm2_benchmarks.py --mbpp-limit 200 --raw 80

Needs `execrl models get smollm2-135m-instruct` first. The last line of stdout is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

MODEL = "smollm2-135m-instruct"
EXECRL = [sys.executable, "-m", "execrl.cli"]


def last_json(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


def generate(bench: str, chat: bool, limit: int, tokens: int, out: Path) -> dict:
    cmd = EXECRL + ["eval", "--model", MODEL, "--benchmark", bench, "--chat", "on" if chat else "off",
                    "--max-new-tokens", str(tokens), "--limit", str(limit), "--out-dir", str(out),
                    "--json"]  # fmt: skip
    return last_json(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def grade(samples: Path, bench: str, output: Path) -> dict:
    cmd = EXECRL + ["eval-samples", str(samples), "--benchmark", bench, "--ignore-unknown",
                    "--output", str(output), "--json"]  # fmt: skip
    return last_json(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def shares(results: Path, tokens: int, tokenizer) -> dict:
    """Of the graded samples: no code taken, did not parse, ran to the token limit."""
    rows = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    n = len(rows)
    no_code = sum(1 for r in rows if not r["solution"].strip())
    syntax = sum(1 for r in rows if r["solution"].strip() and r["verdict"] == "SYNTAX_ERROR")
    at_limit = sum(1 for r in rows if len(tokenizer(r["raw"])["input_ids"]) >= tokens - 8)
    return {"n": n, "no_code": no_code / n, "syntax": syntax / n, "at_limit": at_limit / n}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="evals/smollm2-bench", help="where the runs go")
    p.add_argument("--max-new-tokens", type=int, default=512)
    p.add_argument("--humaneval-limit", type=int, default=0, help="first N tasks (0: all 164)")
    p.add_argument("--mbpp-limit", type=int, default=0, help="first N tasks (0: all 500)")
    p.add_argument(
        "--mbpp-plus-native",
        type=int,
        default=0,
        help="also generate from MBPP+'s own prompts, first N tasks (0: no)",
    )
    p.add_argument(
        "--raw",
        type=int,
        default=-1,
        help="also the raw format (--chat off) on the first N HumanEval tasks (0: all)",
    )
    args = p.parse_args()
    os.environ.setdefault("EXECRL_TRACKERS", "none")
    from execrl.models.loading.loading import load_policy

    tokenizer = load_policy(MODEL).tokenizer
    out, tokens = Path(args.out), args.max_new_tokens
    runs = [("humaneval", True, args.humaneval_limit), ("mbpp", True, args.mbpp_limit)]
    if args.raw >= 0:
        runs.append(("humaneval", False, args.raw))
    if args.mbpp_plus_native:
        runs.append(("mbpp+", True, args.mbpp_plus_native))
    plus = {"humaneval": "humaneval+", "mbpp": "mbpp+"}
    table = []
    for bench, chat, limit in runs:
        fmt = "chat" if chat else "raw"
        where = out / f"{bench.replace('+', 'plus')}-{fmt}"
        summary = generate(bench, chat, limit, tokens, where)
        row = {"benchmark": bench, "format": fmt, "pass@1": summary["pass@1"],
               **shares(where / "results.jsonl", tokens, tokenizer)}  # fmt: skip
        table.append(row)
        if bench in plus:
            graded = grade(where / "samples.jsonl", plus[bench], where / "plus_results.jsonl")
            # the unplussed benchmark's pass@1 on the tasks the plus variant kept, beside it
            kept = {json.loads(x)["task_id"] for x in (where / "plus_results.jsonl").open()}
            mine = [json.loads(x) for x in (where / "results.jsonl").open()]
            same = [r["passed"] for r in mine if r["task_id"] in kept]
            table[-1]["pass@1_on_plus_tasks"] = sum(same) / len(same)
            table.append({"benchmark": plus[bench] + " (same samples)", "format": fmt,
                          "pass@1": graded["pass@1"], "base_pass@1": graded.get("base_pass@1"),
                          **shares(where / "plus_results.jsonl", tokens, tokenizer)})  # fmt: skip
        print(json.dumps(table[-1]), flush=True)
    print("| benchmark | format | tasks | pass@1 | no code | syntax | at limit |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in table:
        print(f"| {r['benchmark']} | {r['format']} | {r['n']} | {100 * r['pass@1']:.1f} % | "
              f"{100 * r['no_code']:.0f} % | {100 * r['syntax']:.0f} % | "
              f"{100 * r['at_limit']:.0f} % |")  # fmt: skip
    print(json.dumps({"max_new_tokens": tokens, "table": table, "load": os.getloadavg()}))


if __name__ == "__main__":
    main()
