"""`execrl sandbox doctor` and `execrl sandbox bench`."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from typing import Any, TypeVar

from execrl.sandbox import (
    Job,
    Limits,
    Sandbox,
    SandboxConfig,
    SandboxUnavailable,
    ServerConfig,
    key_syscall_filter,
    probe_languages,
    probe_layers,
    probe_memory,
    reference_limits,
)
from execrl.tasks.schema import DEFAULT_WALL_S, Task

T = TypeVar("T")
WEAKER_HELP = "start without the isolation layers this machine lacks (e.g. without root)"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sandbox", help="inspect and benchmark the execution sandbox")
    ssub = p.add_subparsers(dest="sandbox_command", metavar="SUBCOMMAND")
    d = ssub.add_parser("doctor", help="print each isolation layer and whether it is active")
    d.add_argument("--json", action="store_true", help="print one JSON object")
    d.set_defaults(handler=run_doctor)
    b = ssub.add_parser(
        "bench",
        help="run every canonical solution of a benchmark R times",
        description="Run the reference solution of every task of a benchmark (those with one) "
        "through the sandbox and report the throughput and any that did not pass.",
    )
    b.add_argument("--benchmark", default="humaneval",
                   help="a benchmark with reference solutions, as `execrl tasks list` names "
                   "them (default humaneval)")  # fmt: skip
    b.add_argument("--repeat", type=int, default=1, metavar="R",
                   help="run each reference R times (default 1)")  # fmt: skip
    b.add_argument("--workers", type=int, default=2,
                   help="sandbox workers running programs in parallel (default 2)")  # fmt: skip
    b.add_argument(
        "--timeout", type=float, default=None, metavar="SECONDS",
        help="wall clock of every run (default: each task's own limits, as `execrl tasks "
        f"validate` gives them: the benchmark's, else {DEFAULT_WALL_S:g} s a run)",
    )  # fmt: skip
    b.add_argument("--json", action="store_true", help="print one JSON line")
    b.add_argument("--allow-weaker-sandbox", action="store_true",
                   help=WEAKER_HELP)  # fmt: skip
    b.set_defaults(handler=run_bench)
    _register_serve(ssub)
    p.set_defaults(handler=lambda args: (p.print_help(), 2)[1])


def _register_serve(ssub: argparse._SubParsersAction) -> None:
    s = ssub.add_parser(
        "serve",
        help="serve the sandbox over HTTP (SandboxFusion's /run_code and graded runs)",
        description="Needs the server extra: pip install 'execrl[server]'.",
    )
    # The defaults are ServerConfig's and its SandboxConfig's (one default per field): None
    # here means "not given".
    server, box = ServerConfig(), SandboxConfig()
    s.add_argument("--host", default=None, help=f"default {server.host}")
    s.add_argument(
        "--port", type=int, default=None,
        help=f"0: any free port, printed on stderr (default {server.port})",
    )  # fmt: skip
    s.add_argument(
        "--workers", type=int, default=None,
        help=f"fork-server workers, per Ray actor (default {box.workers})",
    )  # fmt: skip
    s.add_argument(
        "--max-queue", type=int, default=None,
        help=f"queued runs before 503 (default {server.max_queue})",
    )  # fmt: skip
    s.add_argument(
        "--max-retries", type=int, default=None,
        help=f"retries of SANDBOX_ERROR runs (default {box.max_retries})",
    )  # fmt: skip
    s.add_argument(
        "--max-timeout", type=float, default=None,
        help=f"largest timeout a request may set (default {server.max_timeout_s:g})",
    )  # fmt: skip
    s.add_argument(
        "--token-env",
        default="EXECRL_SANDBOX_TOKEN",
        help="the environment variable holding the bearer token (default EXECRL_SANDBOX_TOKEN; "
        "unset or empty: no authentication)",
    )
    s.add_argument(
        "--data-dir", action="append", default=None, metavar="DIR",
        help="a directory whose files a request's task may name (apps:PATH, livecodebench:PATH, "
        "...); repeatable (default: $EXECRL_DATA_DIR)",
    )  # fmt: skip
    s.add_argument("--ray", metavar="ADDRESS", help="run on a Ray cluster ('local': start one)")
    s.add_argument(
        "--ray-actors", type=int, default=None,
        help=f"sandbox actors on the Ray cluster (default {box.ray_actors})",
    )  # fmt: skip
    s.add_argument("--allow-weaker-sandbox", action="store_true",
                   help=WEAKER_HELP)  # fmt: skip
    s.set_defaults(handler=run_serve)


def run_serve(args: argparse.Namespace) -> int:
    import os

    try:
        from execrl.sandbox import serve
    except ImportError as exc:
        print(
            f"execrl sandbox serve: error: {exc.name or exc} is not installed; "
            "pip install 'execrl[server]'",
            file=sys.stderr,
        )
        return 2
    for name, value, low in (("--workers", args.workers, 1), ("--max-queue", args.max_queue, 1),
                             ("--max-retries", args.max_retries, 0), ("--ray-actors", args.ray_actors, 1)):  # fmt: skip
        if value is not None and value < low:
            print(f"execrl sandbox serve: error: {name} must be at least {low}", file=sys.stderr)
            return 2
    for directory in args.data_dir or ():
        if not os.path.isdir(directory):
            print(f"execrl sandbox serve: error: --data-dir {directory}: not a directory",
                  file=sys.stderr)  # fmt: skip
            return 2
    ray = {"backend": "ray", "ray_address": args.ray} if args.ray is not None else {}
    sandbox = _given(
        SandboxConfig(),
        workers=args.workers,
        max_retries=args.max_retries,
        ray_actors=args.ray_actors,
        allow_missing_layers=args.allow_weaker_sandbox or None,
        **ray,
    )
    config = _given(
        ServerConfig(sandbox=sandbox),
        host=args.host,
        port=args.port,
        max_queue=args.max_queue,
        max_timeout_s=args.max_timeout,
        token=os.environ.get(args.token_env) or None,
        data_dirs=tuple(args.data_dir) if args.data_dir else None,
    )
    try:
        return serve(config)
    except (SandboxUnavailable, OSError) as exc:
        print(f"execrl sandbox serve: error: {exc}", file=sys.stderr)
        return 2


def _bench_limits(task: Task, timeout: float | None) -> Limits:
    """The limits `tasks validate` gives the task's reference; `--timeout` replaces its clocks."""
    limits = reference_limits(task)
    if timeout is None:
        return limits
    return dataclasses.replace(limits, wall_s=timeout, test_wall_s=None, cpu_s=None)


def _given(config: T, **flags: Any) -> T:
    """`config` with the flags that were given (not None) in place of its defaults."""
    return dataclasses.replace(config, **{k: v for k, v in flags.items() if v is not None})


def run_doctor(args: argparse.Namespace) -> int:
    """Probe, then start a one-worker pool and run a check program to show the layers live."""
    probed = probe_layers()
    active: set[str] = set()
    error = ""
    try:
        with Sandbox(workers=1, allow_missing_layers=True) as sb:
            active = set(sb.layers)
            from execrl.tasks.schema import AssertTests

            probe = Job(
                "def f():\n    return 1\n", AssertTests("", ("assert f() == 1",)), entry_point="f"
            )
            result = sb.run(probe)
            if not result.passed:
                error = f"a trivial program did not pass: {result.verdict.value} {result.message}"
    except SandboxUnavailable as exc:
        error = str(exc)
    rows = [
        {"layer": s.name, "available": s.available, "active": s.name in active, "detail": s.detail}
        for s in probed
    ]
    langs = [
        {"language": s.name, "available": s.available, "detail": s.detail}
        for s in probe_languages()
    ]
    # How a run's memory limit binds: the whole run (a memory cgroup) or each process alone.
    mode, detail = probe_memory()
    keyrings = (
        "add_key, request_key and keyctl refused by seccomp (every system call table), in a "
        "fresh session keyring per worker"
        if key_syscall_filter() is not None
        else "NOT refused: this machine's system call numbers are unknown to execrl"
    )
    if args.json:
        ok = not error and all(r["active"] for r in rows)
        memory = {"mode": mode, "detail": detail}
        report = {"layers": rows, "memory": memory, "keyrings": keyrings, "languages": langs}
        print(json.dumps({**report, "ok": ok, "error": error}))
    else:
        for r in rows:
            mark = "active" if r["active"] else ("available" if r["available"] else "UNAVAILABLE")
            print(f"{r['layer']:<11} {mark:<12} {r['detail']}")
        print(f"{'memory':<11} {mode:<12} {detail}")
        print(f"{'keyrings':<11} {'refused' if 'NOT' not in keyrings else 'OPEN':<12} {keyrings}")
        for r in langs:
            mark = "present" if r["available"] else "MISSING"
            print(f"{'lang:' + r['language']:<16} {mark:<8} {r['detail']}")
        if error:
            print(f"error: {error}")
    return 0 if not error and all(r["active"] for r in rows) else 1


def run_bench(args: argparse.Namespace) -> int:
    from execrl.tasks.catalog.registry import load_benchmark
    from execrl.tasks.errors import DataNotFound, TaskDataError, UnknownBenchmark

    for name, value in (("--repeat", args.repeat), ("--workers", args.workers)):
        if value < 1:
            print(f"execrl sandbox bench: error: {name} must be at least 1", file=sys.stderr)
            return 2
    try:
        every = load_benchmark(args.benchmark)
    except (DataNotFound, TaskDataError, UnknownBenchmark) as exc:
        print(f"execrl sandbox bench: error: {exc}", file=sys.stderr)
        return 2
    tasks = [t for t in every if t.reference]
    if not tasks:  # zero runs would report "all_passed" of nothing
        print(f"execrl sandbox bench: error: {args.benchmark}: none of its {len(every)} tasks has "
              "a reference solution, so there is nothing to run; bench a benchmark with "
              "references (humaneval, mbpp, quixbugs, ...)", file=sys.stderr)  # fmt: skip
        return 2
    jobs = [
        Job.for_task(t, t.reference or "", _bench_limits(t, args.timeout)) for t in tasks
    ] * args.repeat
    try:
        with Sandbox(workers=args.workers, allow_missing_layers=args.allow_weaker_sandbox) as sb:
            sb.run_many(jobs[: args.workers * 4])  # warm-up: first forks fault in shared pages
            t0 = time.perf_counter()
            results = sb.run_many(jobs)
            seconds = time.perf_counter() - t0
            layers = list(sb.layers)
            stats = sb.stats
    except SandboxUnavailable as exc:
        print(f"execrl sandbox bench: error: {exc}", file=sys.stderr)
        return 2
    failed = [(j.id, r.verdict.value) for j, r in zip(jobs, results, strict=True) if not r.passed]
    out = {
        "benchmark": args.benchmark,
        "executions": len(results),
        "seconds": round(seconds, 4),
        "exec_per_s": round(len(results) / seconds, 2),
        "all_passed": not failed,
        "workers": args.workers,
        "layers": layers,
        # Masked runs by cause (`SandboxErrorCause`), counted after retries, warm-up included;
        # all of them are infrastructure failures, never a program's doing.
        "sandbox_errors": dict(sorted(stats.sandbox_error_causes.items())),
        "retries": stats.retries,
        "worker_restarts": stats.worker_restarts,
        "possible_hacks": stats.possible_hacks,
    }
    if failed:
        out["failed"] = failed[:20]
    print(json.dumps(out) if args.json else "\n".join(f"{k}: {v}" for k, v in out.items()))
    return 0 if not failed else 1
