"""Stdin/stdout test cases per second on a 200-case problem: execrl's sandbox (every isolation
layer it can start) against the naive floor, a plain `subprocess.run` per case, in one run.

The problem is CodeContests-shaped: read n numbers, print their sum, 200 generated cases. Each
round grades S samples (the right program, and a wrong one that fails the first case, one right
sample in every `--right-every` K, default 2) through
(1) execrl as it is: `Job.stop_at_first_failure` (what a pass/fail reward asks for: no case
after the first failing one, `sandbox/first_failure.py`) and each sample's cases forked by its
case server (`sandbox/cases.py`), (2) execrl's code path before both (every case of every
sample, each forked by the worker: `SandboxConfig(case_server=False)`; `--no-today` leaves it
out), and (3) a plain `subprocess.run([python, -c, program])` per case with the output compared
in the parent, with `--workers` threads as execrl has workers. Both execrl pools start every
isolation layer they can. Verdicts must agree, and the first failing case must be the same in
(1) and (2). Cases per second
count every case of every sample (S x 200), whether run or skipped: the figure is the rate at
which samples get their verdicts. Prints the figures, then one JSON line: the medians over the
rounds and the load average at the start and end.

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


def bench_execrl(
    tests: StdioTests, programs: list[str], sb: Sandbox, stop: bool
) -> tuple[float, list[bool], list[str]]:
    """(cases per second, pass/fail per sample, each sample's verdict message)."""
    limits = Limits(wall_s=600, test_wall_s=5)
    jobs = [Job(p, tests, limits=limits, stop_at_first_failure=stop) for p in programs]
    t0 = time.perf_counter()
    results = sb.run_many(jobs)
    dt = time.perf_counter() - t0
    return (
        len(programs) * len(tests) / dt,
        [r.passed for r in results],
        [r.message for r in results],
    )


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
    ap.add_argument(
        "--right-every", type=int, default=2,
        help="one right sample in every K (the rest fail their first case); stopping at the first "
        "failure saves only on the wrong ones, so the gain over today grows with K",
    )  # fmt: skip
    ap.add_argument(
        "--no-today", dest="today", action="store_false",
        help="leave out execrl's every-case grading (the behaviour before stop_at_first_failure)",
    )  # fmt: skip
    ap.add_argument(
        "--require-speedup", type=float, default=0.0,
        help="exit 1 when the median speedup over today's path is under this (the issue's 3)",
    )  # fmt: skip
    args = ap.parse_args()
    tests = problem(args.cases)
    programs = [RIGHT if i % args.right_every == 0 else WRONG for i in range(args.samples)]
    load_start = os.getloadavg()
    rows = []
    with (
        Sandbox(workers=args.workers) as sb,
        Sandbox(workers=args.workers, case_server=False) as old,
    ):
        for pool in (sb, old):  # warm the workers
            pool.run_many([Job(RIGHT, StdioTests(tests.cases[:4]))] * args.workers)
        for r in range(args.rounds):
            fast, fast_verdicts, fast_msgs = bench_execrl(tests, programs, sb, stop=True)
            today = today_verdicts = None
            if args.today:
                today, today_verdicts, today_msgs = bench_execrl(tests, programs, old, stop=False)
                if (today_verdicts, today_msgs) != (fast_verdicts, fast_msgs):
                    raise SystemExit(f"verdicts differ: {fast_msgs} vs today's {today_msgs}")
            sp, sp_verdicts = bench_subprocess(tests, programs, args.workers)
            if fast_verdicts != sp_verdicts:
                raise SystemExit(
                    f"verdicts differ: execrl {fast_verdicts}, subprocess {sp_verdicts}"
                )
            rows.append((fast, today, sp))
            line = f"round {r}: execrl {fast:.1f} cases/s"
            if today is not None:
                line += f", execrl every case (today) {today:.1f} ({fast / today:.2f}x)"
            print(f"{line}, subprocess.run {sp:.1f} cases/s (execrl / subprocess {fast / sp:.2f})",
                  file=sys.stderr)  # fmt: skip
    summary = {
        "cases": args.cases,
        "samples": args.samples,
        "right_every": args.right_every,
        "workers": args.workers,
        "execrl_cases_per_s": round(statistics.median(f for f, _, _ in rows), 1),
        "subprocess_cases_per_s": round(statistics.median(s for _, _, s in rows), 1),
        "ratio": round(statistics.median(f / s for f, _, s in rows), 3),
        "loadavg_start": load_start[0],
        "loadavg_end": os.getloadavg()[0],
    }
    if args.today:
        summary["execrl_today_cases_per_s"] = round(statistics.median(t for _, t, _ in rows), 1)
        summary["speedup_over_today"] = round(statistics.median(f / t for f, t, _ in rows), 3)
    print(json.dumps(summary))
    if args.today and summary["speedup_over_today"] < args.require_speedup:
        raise SystemExit(f"speedup over today {summary['speedup_over_today']} is under "
                         f"--require-speedup {args.require_speedup}")  # fmt: skip


if __name__ == "__main__":
    main()
