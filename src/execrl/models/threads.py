"""How many threads torch's CPU kernels use: chosen for the cores actually free.

torch starts one intra-op thread per core and its OpenMP threads spin between kernels. On a
machine where other processes (or the sandbox's workers) want those cores, a spinning thread
is descheduled in the middle of a parallel kernel and the others wait for it: measured on the
2-core development VM beside another torch job, the quickstart did not finish 160 steps in
900 s with torch's default 2 threads, and took 94 s with one (issue 29). So a run takes the
cores the load average leaves free when it starts, less one per sandbox worker that runs beside
generation, but at least two when two are free (on 2 quiet cores 2 threads beat 1: the
default's programs run for microseconds). What a person set wins: `model.threads` (or
`execrl eval --threads`), then OMP_NUM_THREADS / MKL_NUM_THREADS, which torch read at import.

The thread count can move a run's last digits (a kernel's sums are split differently), so a
training run writes the count it used into its config.toml and a resumed run keeps it.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

Config = TypeVar("Config")

THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


@dataclass(frozen=True, slots=True)
class Machine:
    """What the choice reads of the machine at start."""

    cores: int  # the processors this process may run on (its affinity mask)
    load: float  # the 1-minute load average
    processes: int = 1  # training processes sharing the cores (torchrun's LOCAL_WORLD_SIZE)

    @staticmethod
    def now() -> Machine:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        local = os.environ.get("LOCAL_WORLD_SIZE", "1")
        return Machine(cores or 1, os.getloadavg()[0], int(local) if local.isdigit() else 1)


@dataclass(frozen=True, slots=True)
class ThreadChoice:
    threads: int  # torch's intra-op threads
    why: str  # what decided it, for the run's first lines

    def line(self) -> str:
        return f"threads: torch uses {self.threads} ({self.why})"


def choose_threads(requested: int, sandbox_workers: int, machine: Machine, setting: str,
                   env: dict[str, str] | None = None) -> ThreadChoice:  # fmt: skip
    """The intra-op thread count: `requested` if above 0, else a thread variable the user set,
    else the cores free at start (see the module's docstring). `sandbox_workers` are the
    workers that run programs while the policy generates (0 where they take turns); `setting`
    names where a person chooses (`model.threads`, `--threads`)."""
    env = dict(os.environ) if env is None else env
    if requested > 0:
        return ThreadChoice(requested, f"{setting} = {requested}")
    for name in THREAD_ENV:
        value = env.get(name, "").strip()
        if value.isdigit() and int(value) > 0:
            return ThreadChoice(int(value), f"{name}={value}")
    free = min(machine.cores, max(1, round(machine.cores - machine.load)))
    free = max(1, free // max(1, machine.processes))
    threads = max(free - sandbox_workers, min(free, 2))
    beside = f", {sandbox_workers} sandbox workers beside it" if sandbox_workers else ""
    return ThreadChoice(
        threads,
        f"{machine.cores} cores, load average {machine.load:.1f} at start{beside}; "
        f"set {setting} or OMP_NUM_THREADS to choose",
    )


def threads_at_start() -> int:
    """The OpenMP thread count a new thread of this process starts with: OMP_NUM_THREADS as it
    was when torch loaded libgomp, else the cores. `torch.set_num_threads` changes only the
    calling thread's count (and the threads torch itself starts), not this one, which vLLM's
    CPU kernels read in the threads they run in."""
    import torch

    maps = Path("/proc/self/maps")
    lines = maps.read_text().splitlines() if maps.exists() else []
    path = next((line.split()[-1] for line in lines if "libgomp" in line), None)
    if path is None:  # another OpenMP (Intel's, LLVM's) or no /proc: torch's count is all we know
        return torch.get_num_threads()
    read = ctypes.CDLL(path).omp_get_max_threads
    got: list[int] = []
    thread = threading.Thread(target=lambda: got.append(read()))
    thread.start()
    thread.join()
    return got[0]


def for_vllm(choice: ThreadChoice, env: dict[str, str] | None = None,
             start: int | None = None, current: int | None = None) -> ThreadChoice:  # fmt: skip
    """`choice` made to hold under a vLLM engine in this process. vLLM's CPU attention checks
    that the count its metadata was built with (torch's) is the count its kernel runs with (the
    one OpenMP gives the thread it runs in, `threads_at_start`: `start`), and fails otherwise
    ("thread_num == thread_num (2 vs. 1)"), so torch's count cannot be set apart from the
    process's. Its worker also sets torch to one thread for serving unless OMP_NUM_THREADS is
    set, and from then on ignores `torch.set_num_threads`: the update runs on that count too.
    Hence: a choice of at least `start` runs at `start`, exported as OMP_NUM_THREADS (into
    `env`, os.environ by default) so that vLLM keeps it; a smaller choice leaves torch at
    `current` (its count now) and vLLM its one thread. Measured on the 2-core VM, eight HumanEval
    answers from Qwen2.5-Coder-0.5B: 78-84 s on one thread against 52 s on two at load 1-2, but
    75-83 s against 227 s at load 3-6, which is why the choice reads the load
    (docs/results/qwen-cpu.md, "Threads under vLLM")."""
    env = os.environ if env is None else env
    value = env.get("OMP_NUM_THREADS", "").strip()
    if value.isdigit() and int(value) > 0:
        return ThreadChoice(int(value), f"OMP_NUM_THREADS={value}, kept by vLLM for its "
                            "engine and the update")  # fmt: skip
    start = threads_at_start() if start is None else start
    if choice.threads >= start:
        env["OMP_NUM_THREADS"] = str(start)
        more = (f"; {start}, the count this process's threads start with: set OMP_NUM_THREADS "
                "before execrl starts for more") if choice.threads > start else ""  # fmt: skip
        return ThreadChoice(start, f"{choice.why}; exported as OMP_NUM_THREADS for vLLM{more}")
    if current is None:
        import torch

        current = torch.get_num_threads()
    return ThreadChoice(current, f"{choice.why}; {choice.threads} wanted, but under vLLM torch "
                        f"stays at {current} until its engine sets one thread for itself and "
                        "the update; set OMP_NUM_THREADS before execrl starts to choose")  # fmt: skip


@contextmanager
def threads_used(choice: ThreadChoice) -> Iterator[None]:
    """torch uses `choice.threads` inside, and what it used before after (a notebook or a test
    that trains keeps its own setting)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(choice.threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def with_threads(config: Config, choice: ThreadChoice) -> Config:
    """`config` (`execrl train`'s or `execrl sft`'s, each with a [model] section) with
    model.threads the count used: its config.toml records it, so a resumed run computes as
    this one did."""
    return replace(config, model=replace(config.model, threads=choice.threads))
