"""Stdin/stdout test cases per second on a 200-case problem: execrl's sandbox (every isolation
layer it can start) against the naive floor, a plain `subprocess.run` per case, in one run.

The problem is CodeContests-shaped: read n numbers, print their sum, 200 generated cases. Each
round grades S samples (the right program, and a wrong one that fails the first case, one right
sample in every `--right-every` K, default 2) through
(1) execrl as it is: `Job.stop_at_first_failure` (what a pass/fail reward asks for: no case
after the first failing one, `sandbox/first_failure.py`) and each sample's cases forked by its
case server (`sandbox/run/cases.py`), (2) execrl's code path before both (every case of every
sample, each forked by the worker: `SandboxConfig(case_server=False)`; `--no-today` leaves it
out), and (3) a plain `subprocess.run([python, -c, program])` per case with the output compared
in the parent, with `--workers` threads as execrl has workers. Both execrl pools start every
isolation layer they can. Verdicts must agree, and the first failing case must be the same in
(1) and (2). Cases per second count every case of every sample (S x 200), whether run or
skipped: the figure is the rate at which samples get their verdicts. Beside it, the CPU time
per case of this process (grading) and of the workers' process trees (their runs, case servers
and the runs those forked), which the machine's load moves less than the wall clock. The two execrl paths alternate which goes
first from round to round. Prints the figures, then one JSON line: the medians over the rounds
and the load average at the start and end.

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
from dataclasses import dataclass
from typing import Any

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


@dataclass(frozen=True, slots=True)
class Measured:
    cases_per_s: float  # every case of every sample, run or skipped, over the wall time
    cpu_ms_per_case: float  # CPU of this process and the workers' process trees, per case
    passed: list[bool]  # per sample
    messages: list[str]  # each sample's verdict message


def _tree_cpu_s(sb: Sandbox) -> float:
    """CPU seconds of the workers and every process they have reaped (their runs, and the
    case servers with the runs those reaped), and of this process (grading)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = sum(os.times()[:2])
    for pid in sb.worker_pids():
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        total += sum(int(x) for x in fields[11:15]) / tick  # utime stime cutime cstime
    return total


def bench_execrl(tests: StdioTests, programs: list[str], sb: Sandbox, stop: bool) -> Measured:
    limits = Limits(wall_s=600, test_wall_s=5)
    jobs = [Job(p, tests, limits=limits, stop_at_first_failure=stop) for p in programs]
    cpu0, t0 = _tree_cpu_s(sb), time.perf_counter()
    results = sb.run_many(jobs)
    dt, cpu = time.perf_counter() - t0, _tree_cpu_s(sb) - cpu0
    n = len(programs) * len(tests)
    return Measured(
        n / dt, 1000 * cpu / n, [r.passed for r in results], [r.message for r in results]
    )


def cpu_ratio(slow: Measured, fast: Measured) -> float | None:
    """How many times the CPU per case of `slow` is that of `fast`; None when either measured
    no CPU at all: the kernel counts CPU time in clock ticks (10 ms), so a short round can read
    zero, and no ratio is better than a division by zero or an infinity."""
    if slow.cpu_ms_per_case <= 0 or fast.cpu_ms_per_case <= 0:
        return None
    return slow.cpu_ms_per_case / fast.cpu_ms_per_case


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
            rows.append(one_round(r, tests, programs, sb, old if args.today else None, args))
    summary = _summary(rows, args, load_start)
    print(json.dumps(summary))
    if args.today and summary["speedup_over_today"] < args.require_speedup:
        raise SystemExit(f"speedup over today {summary['speedup_over_today']} is under "
                         f"--require-speedup {args.require_speedup}")  # fmt: skip


def one_round(
    r: int, tests: StdioTests, programs: list[str], sb: Sandbox, old: Sandbox | None, args: Any
) -> tuple[Measured, Measured | None, float]:
    """(execrl, today's path or None, subprocess.run cases/s); the verdicts checked equal."""
    today = None
    # Today's path first in odd rounds: the machine's load drifts, and a fixed order would
    # hand the drift to one side.
    if old is not None and r % 2:
        today = bench_execrl(tests, programs, old, stop=False)
    fast = bench_execrl(tests, programs, sb, stop=True)
    if old is not None and not r % 2:
        today = bench_execrl(tests, programs, old, stop=False)
    if today is not None and (today.passed, today.messages) != (fast.passed, fast.messages):
        raise SystemExit(f"verdicts differ: {fast.messages} vs today's {today.messages}")
    sp, sp_verdicts = bench_subprocess(tests, programs, args.workers)
    if fast.passed != sp_verdicts:
        raise SystemExit(f"verdicts differ: execrl {fast.passed}, subprocess {sp_verdicts}")
    line = (
        f"round {r}: execrl {fast.cases_per_s:.1f} cases/s "
        f"({fast.cpu_ms_per_case:.2f} ms CPU a case)"
    )
    if today is not None:
        cpu = cpu_ratio(today, fast)
        line += (
            f", today's path {today.cases_per_s:.1f} ({today.cpu_ms_per_case:.2f} ms CPU): "
            f"{fast.cases_per_s / today.cases_per_s:.2f}x wall, "
            + (f"{cpu:.2f}x CPU" if cpu is not None else "CPU ratio unmeasured (under a tick)")
        )
    print(f"{line}; subprocess.run {sp:.1f} cases/s", file=sys.stderr)
    return fast, today, sp


def _summary(
    rows: list[tuple[Measured, Measured | None, float]],
    args: Any,
    load_start: tuple[float, float, float],
) -> dict[str, Any]:
    med = statistics.median
    summary: dict[str, Any] = {
        "cases": args.cases,
        "samples": args.samples,
        "right_every": args.right_every,
        "workers": args.workers,
        "execrl_cases_per_s": round(med(f.cases_per_s for f, _, _ in rows), 1),
        "execrl_cpu_ms_per_case": round(med(f.cpu_ms_per_case for f, _, _ in rows), 3),
        "subprocess_cases_per_s": round(med(s for _, _, s in rows), 1),
        "ratio": round(med(f.cases_per_s / s for f, _, s in rows), 3),
        "loadavg_start": load_start[0],
        "loadavg_end": os.getloadavg()[0],
    }
    if args.today:
        pairs = [(f, t) for f, t, _ in rows if t is not None]
        summary["execrl_today_cases_per_s"] = round(med(t.cases_per_s for _, t in pairs), 1)
        summary["execrl_today_cpu_ms_per_case"] = round(med(t.cpu_ms_per_case for _, t in pairs), 3)
        summary["speedup_over_today"] = round(
            med(f.cases_per_s / t.cases_per_s for f, t in pairs), 3
        )
        cpu = [r for r in (cpu_ratio(t, f) for f, t in pairs) if r is not None]
        summary["cpu_speedup_over_today"] = round(med(cpu), 3) if cpu else None
    return summary


if __name__ == "__main__":
    main()
