"""Load benchmark of `execrl sandbox serve`.

Sends N graded runs at concurrency C to the server (execrl's async client, one /v1/run request
per run), prints throughput and latency percentiles, and checks the server's health over the
run: RSS of the server and its workers after warm-up and at the end, open file descriptors,
processes, and nothing left under the sandbox uids. Then the same programs, as plain scripts,
through SandboxFusion's own async client API (`/run_code`) for the wire overhead, and the same
jobs through the sandbox in-process (`Sandbox.run_many`) for the floor.

    .venv/bin/python benchmarks/load_server.py -n 20000 -c 32 --workers 2

Deliberate failures are part of the mix (a wrong answer, a crash); anything else is an error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time

import httpx

from execrl.sandbox import Job, Limits, Sandbox, Verdict
from execrl.sandbox.service.client import AsyncSandboxClient
from execrl.tasks.schema import AssertTests

TESTS = AssertTests(
    "", ("assert add(1, 2) == 3", "assert add(-1, 1) == 0", "assert add(5, 5) == 10")
)
MIX = [  # (program, the verdict it must get)
    ("def add(a, b):\n    return a + b\n", Verdict.PASSED),
    ("def add(a, b):\n    return a + b\n", Verdict.PASSED),
    ("def add(a, b):\n    return a - b\n", Verdict.WRONG_ANSWER),
    ("def add(a, b):\n    return a + b + undefined\n", Verdict.RUNTIME_ERROR),
]


SERVER_LOG = os.environ.get("EXECRL_SERVER_LOG", "/tmp/execrl-load-server.log")


def jobs(n: int) -> list[tuple[Job, Verdict]]:
    limits = Limits(wall_s=5)
    return [
        (
            Job(MIX[i % len(MIX)][0], TESTS, entry_point="add", limits=limits, id=str(i)),
            MIX[i % len(MIX)][1],
        )
        for i in range(n)
    ]


def percentiles(xs: list[float]) -> dict[str, float]:
    xs = sorted(xs)
    pick = lambda q: xs[min(len(xs) - 1, int(q * len(xs)))] * 1000  # noqa: E731
    return {"p50_ms": round(pick(0.5), 2), "p90_ms": round(pick(0.9), 2),
            "p99_ms": round(pick(0.99), 2), "max_ms": round(xs[-1] * 1000, 2)}  # fmt: skip


def tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            with open(f"/proc/{p}/task/{p}/children") as fh:
                todo.extend(int(c) for c in fh.read().split())
        except OSError:
            pass
    return out


def rss_kb(pids: list[int]) -> int:
    total = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/status") as fh:
                total += int(re.search(r"VmRSS:\s+(\d+)", fh.read()).group(1))
        except (OSError, AttributeError):
            pass
    return total


def snapshot(server_pid: int) -> dict[str, int]:
    pids = tree(server_pid)
    return {
        "server_rss_kb": rss_kb([server_pid]),
        "total_rss_kb": rss_kb(pids),
        "server_fds": len(os.listdir(f"/proc/{server_pid}/fd")),
        "processes": len(pids),
    }


def processes_of(uids: set[int]) -> int:
    n = 0
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                if os.stat(f"/proc/{p}").st_uid in uids:
                    n += 1
            except OSError:
                pass
    return n


async def through_server(url: str, work: list[tuple[Job, Verdict]], c: int) -> dict:
    latencies: list[float] = []
    errors: list[str] = []
    sem = asyncio.Semaphore(c)
    async with AsyncSandboxClient(url, retries=10) as client:

        async def one(job: Job, want: Verdict) -> None:
            async with sem:
                t0 = time.perf_counter()
                try:
                    r = await client.run(job)
                except Exception as exc:  # noqa: BLE001 - counted, reported
                    errors.append(f"{type(exc).__name__}: {exc}")
                    return
                latencies.append(time.perf_counter() - t0)
                if r.verdict is not want:
                    errors.append(
                        f"job {job.id}: {r.verdict.value} (wanted {want.value}) {r.message}"
                    )

        t0 = time.perf_counter()
        await asyncio.gather(*(one(j, v) for j, v in work))
        seconds = time.perf_counter() - t0
    return {"runs": len(work), "seconds": round(seconds, 2), "runs_per_s": round(len(work) / seconds, 1),
            **percentiles(latencies), "errors": len(errors), "first_errors": errors[:5]}  # fmt: skip


async def through_sandbox_fusion(url: str, work: list[tuple[Job, Verdict]], c: int) -> dict:
    from sandbox_fusion import RunCodeRequest, run_code_async

    sem = asyncio.Semaphore(c)
    latencies: list[float] = []
    errors: list[str] = []

    async def one(job: Job, want: Verdict) -> None:
        # How SandboxFusion users grade: the program and its asserts as one script.
        script = job.program + "\n" + "\n".join(job.tests.statements) + "\n"
        async with sem:
            t0 = time.perf_counter()
            try:
                r = await run_code_async(RunCodeRequest(code=script, language="python",
                                                        run_timeout=5), endpoint=url)  # fmt: skip
            except Exception as exc:  # noqa: BLE001
                errors.append(f"{type(exc).__name__}: {exc}")
                return
            latencies.append(time.perf_counter() - t0)
            if (r.status.value == "Success") != (want is Verdict.PASSED):
                errors.append(f"job {job.id}: {r.status.value} (wanted {want.value})")

    t0 = time.perf_counter()
    await asyncio.gather(*(one(j, v) for j, v in work))
    seconds = time.perf_counter() - t0
    return {"runs": len(work), "seconds": round(seconds, 2), "runs_per_s": round(len(work) / seconds, 1),
            **percentiles(latencies), "errors": len(errors), "first_errors": errors[:5]}  # fmt: skip


def in_process(work: list[tuple[Job, Verdict]], workers: int) -> dict:
    with Sandbox(workers=workers) as sb:
        sb.run_many([j for j, _ in work[: 8 * workers]])  # warm-up
        t0 = time.perf_counter()
        results = sb.run_many([j for j, _ in work])
        seconds = time.perf_counter() - t0
    wrong = sum(r.verdict is not v for r, (_, v) in zip(results, work, strict=True))
    return {"runs": len(work), "seconds": round(seconds, 2),
            "runs_per_s": round(len(work) / seconds, 1), "errors": wrong}  # fmt: skip


def start_server(workers: int, max_queue: int) -> tuple[subprocess.Popen, str]:
    cmd = [sys.executable, "-m", "execrl.cli", "sandbox", "serve", "--port", "0",
           "--workers", str(workers), "--max-queue", str(max_queue)]  # fmt: skip
    log = open(SERVER_LOG, "w")  # noqa: SIM115 - the server's stderr, for its whole life
    proc = subprocess.Popen(cmd, stderr=log, text=True)
    for _ in range(600):
        time.sleep(0.1)
        with open(SERVER_LOG) as fh:
            m = re.search(r"listening on (http://\S+)", fh.read())
        if m:
            return proc, m.group(1)
        if proc.poll() is not None:
            break
    raise SystemExit(f"server did not start; see {SERVER_LOG}")


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("-n", type=int, default=2000, help="graded runs through the server")
    ap.add_argument("-c", type=int, default=32, help="concurrent requests")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument(
        "--sf-n", type=int, default=None, help="runs through SandboxFusion's client (default n/4)"
    )
    ap.add_argument("--skip-in-process", action="store_true")
    args = ap.parse_args()

    proc, url = start_server(args.workers, max_queue=max(256, 2 * args.c))
    out: dict = {
        "n": args.n,
        "concurrency": args.c,
        "workers": args.workers,
        "cpus": os.cpu_count(),
    }
    try:
        warm = max(200, args.n // 20)
        asyncio.run(through_server(url, jobs(warm), args.c))
        out["after_warmup"] = snapshot(proc.pid)
        out["server"] = asyncio.run(through_server(url, jobs(args.n), args.c))
        out["at_end"] = snapshot(proc.pid)
        out["rss_growth"] = round(
            out["at_end"]["server_rss_kb"] / out["after_warmup"]["server_rss_kb"] - 1, 3
        )
        sf_n = args.sf_n if args.sf_n is not None else max(100, args.n // 4)
        out["sandbox_fusion_client"] = asyncio.run(through_sandbox_fusion(url, jobs(sf_n), args.c))
        health = httpx.get(url + "/health").json()
    finally:
        proc.send_signal(signal.SIGTERM)
        out["server_exit"] = proc.wait(timeout=60)
    time.sleep(0.5)
    out["left_after_stop"] = {
        "worker_processes": sum(os.path.exists(f"/proc/{p}") for p in health["worker_pids"]),
        "sandbox_uid_processes": processes_of(set(health["worker_uids"])),
    }
    if not args.skip_in_process:
        out["in_process"] = in_process(jobs(args.n), args.workers)
        out["server_vs_in_process"] = round(
            out["server"]["runs_per_s"] / out["in_process"]["runs_per_s"], 3
        )
    print(json.dumps(out, indent=2))
    ok = out["server"]["errors"] == 0 and out["server_exit"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
