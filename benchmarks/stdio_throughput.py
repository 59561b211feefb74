"""Stdin/stdout test cases per second on a 200-case problem: execrl's sandbox (every isolation
layer it can start) against the naive floor, a plain `subprocess.run` per case, in one run.

The problem is CodeContests-shaped: read n numbers, print their sum, 200 generated cases. Each
round grades S samples (the right program, and a wrong one that fails the first case) through
(1) execrl, all cases of each sample (the grade every reward needs today), and (2) a plain
`subprocess.run([python, -c, program])` per case with the output compared in the parent, with
`--workers` threads as execrl has workers. Verdicts must agree. Prints the figures, then one JSON
line: execrl_cases_per_s, subprocess_cases_per_s, ratio (medians over the rounds), and the load
average at the start and end.

    .venv/bin/python benchmarks/stdio_throughput.py --samples 4 --rounds 3 --workers 2
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from execrl.sandbox import Job, Limits, Sandbox
from execrl.tasks.schema import StdioCase, StdioTests

RIGHT = "import sys\nxs = sys.stdin.read().split()\nprint(sum(map(int, xs[1:])))\n"
WRONG = "import sys\nxs = sys.stdin.read().split()\nprint(sum(map(int, xs[1:])) + 1)\n"


def problem(n_cases: int, seed: int = 0) -> StdioTests:
    rng = random.Random(seed)
    cases = []
    for _ in range(n_cases):
        xs = [rng.randint(-(10**6), 10**6) for _ in range(rng.randint(1, 50))]
        cases.append(StdioCase(f"{len(xs)}\n{' '.join(map(str, xs))}\n", f"{sum(xs)}\n"))
    return StdioTests(tuple(cases))


def bench_execrl(tests: StdioTests, programs: list[str], sb: Sandbox) -> tuple[float, list[bool]]:
    jobs = [Job(p, tests, limits=Limits(wall_s=600, test_wall_s=5)) for p in programs]
    t0 = time.perf_counter()
    results = sb.run_many(jobs)
    dt = time.perf_counter() - t0
    return len(programs) * len(tests) / dt, [r.passed for r in results]


def _plain_one(program: str, tests: StdioTests) -> bool:
    ok = True
    for case in tests.cases:
        out = subprocess.run([sys.executable, "-c", program], input=case.stdin,
                             capture_output=True, text=True, timeout=5)  # fmt: skip
        ok = ok and out.returncode == 0 and out.stdout.split() == case.stdout.split()
    return ok


def bench_subprocess(
    tests: StdioTests, programs: list[str], workers: int
) -> tuple[float, list[bool]]:
    t0 = time.perf_counter()
    with ThreadPoolExecutor(workers) as ex:
        passed = list(ex.map(lambda p: _plain_one(p, tests), programs))
    dt = time.perf_counter() - t0
    return len(programs) * len(tests) / dt, passed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--samples", type=int, default=4, help="samples graded per round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    tests = problem(args.cases)
    programs = [RIGHT if i % 2 == 0 else WRONG for i in range(args.samples)]
    load_start = os.getloadavg()
    rows = []
    with Sandbox(workers=args.workers) as sb:
        sb.run_many([Job(RIGHT, StdioTests(tests.cases[:4]))] * args.workers)  # warm the workers
        for r in range(args.rounds):
            ex, ex_verdicts = bench_execrl(tests, programs, sb)
            sp, sp_verdicts = bench_subprocess(tests, programs, args.workers)
            if ex_verdicts != sp_verdicts:
                raise SystemExit(f"verdicts differ: execrl {ex_verdicts}, subprocess {sp_verdicts}")
            rows.append((ex, sp))
            print(f"round {r}: execrl {ex:.1f} cases/s, subprocess.run {sp:.1f} cases/s "
                  f"(execrl / subprocess {ex / sp:.2f})", file=sys.stderr)  # fmt: skip
    summary = {
        "cases": args.cases,
        "samples": args.samples,
        "workers": args.workers,
        "execrl_cases_per_s": round(statistics.median(e for e, _ in rows), 1),
        "subprocess_cases_per_s": round(statistics.median(s for _, s in rows), 1),
        "ratio": round(statistics.median(e / s for e, s in rows), 3),
        "loadavg_start": load_start[0],
        "loadavg_end": os.getloadavg()[0],
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
