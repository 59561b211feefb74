"""Expected outputs of HumanEval+ (or MBPP+) on a cold cache: execrl against EvalPlus's own
`get_groundtruth`, in the same rounds, each in a fresh process of its own.

EvalPlus runs every reference in its own process, unsandboxed (`trusted_exec`), and pickles
the outputs; execrl runs them in its sandbox (`execrl.sandbox.reference_runner`) and caches
them as gzipped JSON. Each contender gets an empty temporary cache directory (EvalPlus's
`CACHE_DIR`, execrl's `EXECRL_CACHE_DIR`), so nobody's cache is read or destroyed. Then a warm
execrl load from the cache it just wrote. Prints each round, the load average, then one JSON
line: seconds per contender (median), the ratio execrl/EvalPlus (median of the rounds' own
ratios, and every round's), and whether the outputs were equal.

    EXECRL_DATA_DIR=/work/shared/data .venv/bin/python benchmarks/expected_outputs_vs_evalplus.py
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FILES = {
    "humaneval+": ("humanevalplus/HumanEvalPlus-v0.1.10.jsonl.gz", "HUMANEVAL_OVERRIDE_PATH"),
    "mbpp+": ("mbppplus/MbppPlus-v0.2.0.jsonl.gz", "MBPP_OVERRIDE_PATH"),
}

# EvalPlus's get_groundtruth, as `evalplus.evaluate` calls it. evalplus.evaluate imports its
# code generator, which needs tree-sitter, which the evaluation does not use: a stand-in module
# takes its place, so the function timed is EvalPlus's own.
EVALPLUS = r"""
import json, os, sys, time, types
sys.modules["evalplus.codegen"] = types.SimpleNamespace(run_codegen=None)
import evalplus.evaluate as ev
from evalplus.data import get_human_eval_plus, get_human_eval_plus_hash, get_mbpp_plus, get_mbpp_plus_hash
from evalplus.eval._special_oracle import MBPP_OUTPUT_NOT_NONE_TASKS
bench, cache, ids = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
ev.CACHE_DIR = cache
if bench == "humaneval+":
    problems, h, not_none = get_human_eval_plus(), get_human_eval_plus_hash(), []
else:
    problems, h, not_none = get_mbpp_plus(), get_mbpp_plus_hash(), MBPP_OUTPUT_NOT_NONE_TASKS
if ids:
    problems = {k: problems[k] for k in ids}
t0 = time.perf_counter()
ev.get_groundtruth(problems, h + "-bench", not_none)
print(json.dumps({"seconds": time.perf_counter() - t0}))
"""

EXECRL = r"""
import json, os, sys, time
from execrl.sandbox.reference_runner import sandbox_runner
from execrl.tasks import load_benchmark
bench, data, ids = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]) or None
t0 = time.perf_counter()
tasks = load_benchmark(bench, data, ids=ids, reference_runner=sandbox_runner(progress=False))
cold = time.perf_counter() - t0
t0 = time.perf_counter()
load_benchmark(bench, data, ids=ids)
warm = time.perf_counter() - t0
excluded = {t.id: sorted(t.metadata["excluded_inputs"]) for t in tasks if t.metadata["excluded_inputs"]}
print(json.dumps({"seconds": cold, "warm_seconds": warm, "excluded": excluded}))
"""


# Run once, untimed, after the first round: every output execrl cached equals EvalPlus's
# pickled one, type for type (a tuple is not a list, 1 is not 1.0), except the inputs execrl
# leaves out (it says which, and why).
COMPARE = r"""
import json, math, pickle, sys
from pathlib import Path
from execrl.tasks.evalplus import ground_truth, read_problems
path, dataset, pkl, ids = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
sys.set_int_max_str_digits(0)

def same(a, b):
    if isinstance(a, dict) and isinstance(b, dict):  # EvalPlus keeps Counter, execrl a dict
        return len(a) == len(b) and all(k in b and same(v, b[k]) for k, v in a.items())
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return a == b

with open(pkl, "rb") as f:
    theirs = pickle.load(f)
problems = [p for p in read_problems(Path(path), dataset) if not ids or p.task_id in ids]
ours = ground_truth(Path(path), problems, None)
differ, compared = [], 0
for p in problems:
    expected = theirs[p.task_id]["base"] + theirs[p.task_id]["plus"]
    gt = ours[p.task_id]
    for i, (mine, their) in enumerate(zip(gt.outputs, expected, strict=True)):
        if i in gt.excluded:
            continue
        compared += 1
        if not same(mine, their):
            differ.append(f"{p.task_id} input {i}")
print(json.dumps({"compared": compared, "differ": differ}))
"""


def run_one(code: str, argv: list[str], env: dict[str, str]) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", code, *argv], env=env, capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise SystemExit(f"a contender failed (exit {out.returncode}):\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def one_round(
    args: argparse.Namespace, data: Path, order: list[str], compare: bool
) -> dict[str, object]:
    rel, override = FILES[args.benchmark]
    ids = json.dumps(args.ids)
    result: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="bench-expected-outputs-") as root:
        caches = {name: Path(root) / name for name in order}
        for name in order:
            cache = str(caches[name])
            env = dict(os.environ, EXECRL_CACHE_DIR=cache, **{override: str(data / rel)})
            if name == "evalplus":
                r = run_one(EVALPLUS, [args.benchmark, cache, ids], env)
            else:
                r = run_one(EXECRL, [args.benchmark, str(data), ids], env)
                result["warm"] = r["warm_seconds"]
                result["excluded"] = r["excluded"]
            result[name] = r["seconds"]
        if compare:
            (pkl,) = caches["evalplus"].glob("*-bench.pkl")
            dataset = "humaneval" if args.benchmark == "humaneval+" else "mbpp"
            env = dict(os.environ, EXECRL_CACHE_DIR=str(caches["execrl"]))
            result["compare"] = run_one(COMPARE, [str(data / rel), dataset, str(pkl), ids], env)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--benchmark", choices=sorted(FILES), default="humaneval+")
    ap.add_argument("--rounds", type=int, default=3, help="order reversed every other round")
    ap.add_argument("--ids", nargs="*", default=[], help="only these task ids (default: all)")
    args = ap.parse_args()
    data = Path(os.environ.get("EXECRL_DATA_DIR", "/work/shared/data"))
    rounds = []
    order = ["evalplus", "execrl"]
    for k in range(args.rounds):
        before = Path("/proc/loadavg").read_text().split()[:3]
        r = one_round(args, data, order if k % 2 == 0 else order[::-1], compare=k == 0)
        r["loadavg"] = [before, Path("/proc/loadavg").read_text().split()[:3]]
        rounds.append(r)
        print(
            f"round {k + 1}: EvalPlus get_groundtruth {r['evalplus']:.1f}s, execrl cold "
            f"{r['execrl']:.1f}s (ratio {r['execrl'] / r['evalplus']:.2f}x), warm {r['warm']:.1f}s;"
            f" excluded inputs {r['excluded']}; loadavg before {' '.join(before)}, after "
            f"{' '.join(r['loadavg'][1])}",
            flush=True,
        )
        if "compare" in r:
            print(f"outputs compared with EvalPlus's: {r['compare']}", flush=True)
    ratios = [r["execrl"] / r["evalplus"] for r in rounds]
    summary = {
        "benchmark": args.benchmark,
        "evalplus_s": round(statistics.median(r["evalplus"] for r in rounds), 2),
        "execrl_cold_s": round(statistics.median(r["execrl"] for r in rounds), 2),
        "execrl_warm_s": round(statistics.median(r["warm"] for r in rounds), 2),
        "ratio": round(statistics.median(ratios), 3),
        "round_ratios": [round(x, 3) for x in ratios],
        "loadavg": [r["loadavg"] for r in rounds],
        "outputs_compared": rounds[0]["compare"]["compared"],
        "outputs_differ": rounds[0]["compare"]["differ"],
        "at": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
