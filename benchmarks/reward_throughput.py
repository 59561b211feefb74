"""Reward scoring against the bare sandbox on the same 1,000 HumanEval programs, in one run.

Issue 4: scoring runs at the sandbox's own throughput (within 10 %). The completions are GRPO-like
groups of 6 per task: the canonical solution three times, a passing variant with an unused
import and a style fault, and two wrong ones (`return None` first, `raise` first), cycling over
the 164 tasks. `--distinct` makes every program different (a trailing comment), so the
analysis cache cannot help: the worst case. Paths, interleaved and repeated (best of R each):

  sandbox          Sandbox.run_many on the programs the scorer runs
  exec-only        RewardScorer, tree = pass_fraction
  static mix       RewardScorer, pass_fraction + static + style + security, analyses in a worker,
                   with the pure-Python analysers (pyflakes, pycodestyle, bandit)
  ruff mix         the same tree with backend = "ruff" on the three leaves: one ruff per chunk
  static serial    the same trees with reward.analysis_workers = 0 (analyses in the caller)
  ruff serial
`--backend python|ruff|both` picks the analysers (both by default, in the same run as the
sandbox-alone baseline).

Each scorer is new per repeat (an empty analysis cache) and warmed on other programs first, as
a trainer's long-lived scorer is. Prints the figures, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable

from execrl.rewards import RewardConfig, RewardScorer
from execrl.sandbox import Job, Sandbox, SandboxConfig
from execrl.tasks import Task
from execrl.tasks.catalog.registry import load_benchmark

BACKENDS = {
    "python": {"static": "pyflakes", "style": "pycodestyle", "security": "bandit"},
    "ruff": {"static": "ruff", "style": "ruff", "security": "ruff"},
}


def static_mix(backend: str) -> dict:
    """pass_fraction + static + style + security, the analyses from `BACKENDS[backend]`."""
    use = BACKENDS[backend]
    return {
        "type": "sum",
        "terms": [
            {"weight": 1.0, "type": "pass_fraction"},
            {"weight": 0.2, "type": "static", "backend": use["static"]},
            {"weight": 0.1, "type": "style", "backend": use["style"]},
            {"weight": 0.2, "type": "security", "backend": use["security"]},
        ],
    }


GROUP = (
    "{}",
    "{}",
    "{}",
    "    import os\n    unused=1\n{}",
    "    return None\n{}",
    "    raise ValueError('no idea')\n{}",
)


def completions(n: int, distinct: bool) -> tuple[list[Task], list[str]]:
    tasks = [t for t in load_benchmark("humaneval") if t.reference]
    out_t, out_c = [], []
    for i in range(n):
        task = tasks[(i // len(GROUP)) % len(tasks)]
        body = task.reference[len(task.prompt) :]  # type: ignore[index]
        text = GROUP[i % len(GROUP)].format(body)
        out_t.append(task)
        out_c.append(text + (f"\n    # completion {i}\n" if distinct else ""))
    return out_t, out_c


def tree_cpu_s() -> float:
    """CPU seconds used so far by this process and every process under it (sandbox workers and
    the programs they ran, analysis workers), from /proc: the load-independent cost."""
    parent: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # exited meanwhile
            continue
        parent[int(entry)] = int(fields[1])
        ticks[int(entry)] = sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    me, total = os.getpid(), 0
    for pid in ticks:
        p = pid
        while p > 1 and p != me:
            p = parent.get(p, 0)
        total += ticks[pid] if p == me else 0
    return total / os.sysconf("SC_CLK_TCK")


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process tree)."""
    c0, t0 = tree_cpu_s(), time.perf_counter()
    fn()
    return time.perf_counter() - t0, tree_cpu_s() - c0


def scorer_run(
    sb: Sandbox, tree: dict, workers: int, tasks: list[Task], texts: list[str]
) -> tuple[float, float]:
    config = RewardConfig.from_dict(
        {"tree": tree, "program": "continue", "analysis_workers": workers}
    )
    with RewardScorer(config, sandbox=sb) as scorer:
        scorer.score(tasks[:8], ["    pass\n"] * 8)  # warm: starts the analysis worker
        return timed(lambda: scorer.score(tasks, texts))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-n", type=int, default=1000, help="completions")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2, help="sandbox workers")
    ap.add_argument("--distinct", action="store_true", help="every program different")
    ap.add_argument("--analysis-workers", type=int, default=RewardConfig().analysis_workers)
    ap.add_argument("--no-serial", action="store_true", help="skip the in-process static paths")
    ap.add_argument(
        "--backend", choices=("python", "ruff", "both"), default="both", help="the analysers"
    )
    args = ap.parse_args()
    tasks, texts = completions(args.n, args.distinct)
    limits = SandboxConfig().limits  # the limits the scorer gives each run, for the bare runs too
    jobs = [
        Job(t.prompt + c, t.tests, t.entry_point, limits=limits, id=t.id)
        for t, c in zip(tasks, texts, strict=True)
    ]
    paths: dict[str, Callable[[Sandbox], tuple[float, float]]] = {
        "sandbox": lambda sb: timed(lambda: sb.run_many(jobs)),
        "exec-only": lambda sb: scorer_run(sb, {"type": "pass_fraction"}, 1, tasks, texts),
    }
    backends = ("python", "ruff") if args.backend == "both" else (args.backend,)
    label = {"python": "static", "ruff": "ruff"}
    for backend in backends:
        tree = static_mix(backend)
        paths[f"{label[backend]} mix"] = lambda sb, tree=tree: scorer_run(
            sb, tree, args.analysis_workers, tasks, texts
        )
    for backend in () if args.no_serial else backends:
        tree = static_mix(backend)
        paths[f"{label[backend]} serial"] = lambda sb, tree=tree: scorer_run(
            sb, tree, 0, tasks, texts
        )
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in paths}
    load0 = os.getloadavg()[0]
    with Sandbox(workers=args.workers) as sb:
        sb.run_many(jobs[: args.workers * 4])
        for _ in range(args.repeat):
            for name, run in paths.items():
                times[name].append(run(sb))
    rate = {k: args.n / min(w for w, _ in v) for k, v in times.items()}
    cpu_ms = {k: 1000 * min(c for _, c in v) / args.n for k, v in times.items()}
    base, base_cpu = rate["sandbox"], cpu_ms["sandbox"]
    for k, r in rate.items():
        runs = ", ".join(f"{args.n / w:.0f}" for w, _ in times[k])
        print(
            f"{k:14s} {r:7.1f} exec/s  ratio {r / base:.3f}  (runs: {runs});  "
            f"{cpu_ms[k]:.2f} CPU ms each, CPU ratio {base_cpu / cpu_ms[k]:.3f}"
        )
    key = {k: k.replace(" ", "_").replace("-", "_") for k in rate}
    print(
        json.dumps(
            {
                "n": args.n,
                "distinct_programs": len(set(texts)),
                "sandbox_workers": args.workers,
                "analysis_workers": args.analysis_workers,
                "backends": list(backends),
                **{f"{key[k]}_exec_per_s": round(r, 1) for k, r in rate.items()},
                **{f"{key[k]}_ratio": round(r / base, 3) for k, r in rate.items()},
                **{f"{key[k]}_cpu_ms": round(c, 2) for k, c in cpu_ms.items()},
                **{f"{key[k]}_cpu_ratio": round(base_cpu / c, 3) for k, c in cpu_ms.items()},
                "load_avg_1m": [round(load0, 2), round(os.getloadavg()[0], 2)],
                "cpus": os.cpu_count(),
            }
        )
    )


if __name__ == "__main__":
    main()
