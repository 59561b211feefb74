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

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
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


def for_vllm(choice: ThreadChoice, env: dict[str, str] | None = None) -> ThreadChoice:
    """`choice` made to hold under a vLLM engine in this process. vLLM's CPU worker sets torch to
    one thread for serving unless OMP_NUM_THREADS is set, and from then on ignores
    `torch.set_num_threads`, so the trainer's update runs on that count too. Its CPU attention
    also checks that the count its metadata was built with is the count its kernel runs with,
    so torch's count alone cannot be changed before the engine starts ("thread_num ==
    thread_num (2 vs. 1)"). Hence a choice above one is exported as OMP_NUM_THREADS (into
    `env`, os.environ by default) before the engine starts, with torch at the same count; a
    choice of one leaves vLLM its own. Measured on the 2-core VM, eight HumanEval answers from
    Qwen2.5-Coder-0.5B: 78-84 s on one thread against 52 s on two at load 1-2, but 75-83 s
    against 227 s at load 3-6, which is why the choice reads the load
    (docs/results/qwen-cpu.md, "Threads under vLLM")."""
    env = os.environ if env is None else env
    value = env.get("OMP_NUM_THREADS", "").strip()
    if value.isdigit() and int(value) > 0:
        return ThreadChoice(int(value), f"OMP_NUM_THREADS={value}, kept by vLLM for its "
                            "engine and the update")  # fmt: skip
    if choice.threads > 1:
        env["OMP_NUM_THREADS"] = str(choice.threads)
        return ThreadChoice(choice.threads, f"{choice.why}; exported as OMP_NUM_THREADS for vLLM")
    return ThreadChoice(1, f"{choice.why}; vLLM keeps one for its engine and the update")


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
