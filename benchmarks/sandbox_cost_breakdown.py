"""Where a sandbox run's CPU goes: the pool, the worker, the run's own process; and the fork floor's.

`sandbox_vs_human_eval.py` gives one figure per contender (CPU of the whole process tree per
run). This splits execrl's into the pool (this process: encoding the job, reading the reply,
grading), the worker's own work (its loop, the fork, the watch) and the run's process (confining
itself, the harness, the candidate and the tests, its exit), with the minor page faults of the
worker and of each run (every page written after a fork traps once, and is copied while the
other process still shares it); and the fork floor's (`sandbox_vs_human_eval.FORK_SERVER`) into
its server and its children. One worker and one fork server, so that nothing else runs beside
them; `--trivial` adds a one-line program with one test, the fixed cost of a run.

    python benchmarks/sandbox_cost_breakdown.py --repeat 5 --rounds 3

CPU comes from /proc (clock ticks), so use a few hundred runs a round at least.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sandbox_vs_human_eval import FORK_SERVER, _problems, _program  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
TRIVIAL = ("def f(x):\n    return x\n", "assert candidate(1) == 1")


def _proc_stat(pid: int) -> dict[str, float]:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return {
        "faults": int(fields[7]),
        "child_faults": int(fields[8]),
        "cpu": (int(fields[11]) + int(fields[12])) / TICK,
        "child_cpu": (int(fields[13]) + int(fields[14])) / TICK,
    }


def execrl_split(repeat: int, trivial: bool, n_tasks: int) -> dict[str, float]:
    from execrl.sandbox import Job, Limits, Sandbox
    from execrl.tasks.catalog.registry import load_benchmark
    from execrl.tasks.schema import AssertTests

    tasks = load_benchmark("humaneval")[:n_tasks]
    if trivial:
        tests = AssertTests(setup="", statements=(TRIVIAL[1],))
        jobs = [Job(TRIVIAL[0], tests, "f", limits=Limits(wall_s=3.0))] * len(tasks)
    else:
        jobs = [
            Job(t.reference or "", t.tests, t.entry_point, limits=Limits(wall_s=3.0), id=t.id)
            for t in tasks
        ]
    jobs *= repeat
    with Sandbox(workers=1) as sb:
        sb.run_many(jobs[:8])
        (worker,) = sb.worker_pids()
        pool0, w0 = os.times(), _proc_stat(worker)
        results = sb.run_many(jobs)
        pool1, w1 = os.times(), _proc_stat(worker)
    if not all(r.passed for r in results):
        raise SystemExit("a canonical solution failed: the split would not be of passing runs")
    n = len(jobs)
    return {
        "pool_ms": (pool1.user + pool1.system - pool0.user - pool0.system) / n * 1e3,
        "worker_ms": (w1["cpu"] - w0["cpu"]) / n * 1e3,
        "run_ms": (w1["child_cpu"] - w0["child_cpu"]) / n * 1e3,
        "worker_faults": (w1["faults"] - w0["faults"]) / n,
        "run_faults": (w1["child_faults"] - w0["child_faults"]) / n,
    }


# The fork floor's server, reporting its own and its children's CPU and faults at the end.
SPLIT = """
import resource as _r
_s, _c = _r.getrusage(_r.RUSAGE_SELF), _r.getrusage(_r.RUSAGE_CHILDREN)
print(json.dumps([_s.ru_utime + _s.ru_stime, _s.ru_minflt, _c.ru_utime + _c.ru_stime, _c.ru_minflt]))
"""


def floor_split(repeat: int, trivial: bool, n_tasks: int) -> dict[str, float]:
    programs = (
        [f"{TRIVIAL[0]}candidate = f\n{TRIVIAL[1]}\n"] * n_tasks
        if trivial
        else [_program(p) for p in _problems(n_tasks, 1)]
    ) * repeat
    # The counters from the "ready" line on: the server's start and imports are not a run's.
    server = FORK_SERVER.replace(
        'print("ready", flush=True)', 'print("ready", flush=True)' + SPLIT
    ).replace("print(json.dumps(passed), flush=True)", SPLIT.strip())
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    out = subprocess.run(
        [sys.executable, "-c", server],
        input=json.dumps(programs).encode(),
        capture_output=True,
        env=env,
        check=True,
    ).stdout.decode()
    before, after = (json.loads(line) for line in out.splitlines()[1:3])
    n = len(programs)
    return {
        "server_ms": (after[0] - before[0]) / n * 1e3,
        "server_faults": (after[1] - before[1]) / n,
        "run_ms": (after[2] - before[2]) / n * 1e3,
        "run_faults": (after[3] - before[3]) / n,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=5, help="HumanEval's runs, this many times")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--trivial", action="store_true", help="also a one-line program, one test")
    ap.add_argument("--tasks", type=int, default=164, help="the first N HumanEval tasks only")
    args = ap.parse_args()
    kinds = [False, True] if args.trivial else [False]
    rows: dict[str, list[dict[str, float]]] = {}
    for k in range(args.rounds):
        load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
        for trivial in kinds:
            name = "trivial" if trivial else "humaneval"
            pair = [("execrl", execrl_split), ("fork floor", floor_split)]
            for label, split in pair if k % 2 == 0 else pair[::-1]:
                row = split(args.repeat, trivial, args.tasks)
                rows.setdefault(f"{name}, {label}", []).append(row)
                print(f"round {k + 1} (loadavg {load}) {name}, {label}: " + _fmt(row), flush=True)
    summary: dict[str, Any] = {}
    for key, found in rows.items():
        median = {f: statistics.median(r[f] for r in found) for f in found[0]}
        summary[key] = {f: round(v, 3) for f, v in median.items()}
        total = sum(v for f, v in median.items() if f.endswith("_ms"))
        print(f"median, {key}: {_fmt(median)}; total {total:.2f} ms CPU a run")
    summary["maxrss_kb_of_this_process"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps(summary))


def _fmt(row: dict[str, float]) -> str:
    return ", ".join(
        f"{f} {v:.3f}" if f.endswith("_ms") else f"{f} {v:.0f}" for f, v in row.items()
    )


if __name__ == "__main__":
    main()
