"""The trainer's memory, once a step: what shows a run creeping toward an out-of-memory kill
before the kernel ends it (a SmolLM2 run on 24 GiB was killed at 12 GiB resident, with nothing
in its log to say it was growing).

`mem/rss_gib`: the process's resident memory at the end of the step; with an engine in the same
process (vLLM on a CPU) that includes the engine's weights and KV cache. `mem/peak_rss_gib`: the
most it has held since it started. `mem/device_peak_gib`: on a GPU, the most torch allocated on
it during the step (the peak is reset after each reading).
"""

from __future__ import annotations

import os
import resource
import sys

import torch

GIB = float(1 << 30)


def memory_metrics(device: torch.device) -> dict[str, float]:
    """The step's mem/... entries of metrics.jsonl."""
    resident = _rss_bytes()
    # the kernel's high-water mark trails the resident count by what a thread has not yet
    # folded into it: the peak is at least what is resident now
    row = {"mem/peak_rss_gib": max(_peak_rss_bytes(), resident or 0) / GIB}
    if resident is not None:
        row["mem/rss_gib"] = resident / GIB
    if device.type == "cuda":
        row["mem/device_peak_gib"] = torch.cuda.max_memory_allocated(device) / GIB
        torch.cuda.reset_peak_memory_stats(device)
    return row


def _peak_rss_bytes() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB elsewhere


def _rss_bytes() -> int | None:
    """Resident now, from /proc (Linux); None where there is none."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None
