"""glibc's heap on a CPU run: large temporaries go back to the kernel when freed.

A Qwen2.5-Coder-0.5B training step on the CPU (vLLM generating in this process, then the update)
grew the process by about 2 GiB every few steps, 14.1 GiB after step 0 to 19.1 GiB after step 7,
and it was not a leak: after step 1 glibc's heap was 8.25 GiB of which 1.7 GiB was in use
(`mallinfo2`; `benchmarks/memory_watch.py`, docs/results/qwen-cpu.md "Memory"). glibc raises its
mmap threshold each time a large mapped block is freed (up to 32 MiB), so from the first step on
the decoder's per-token logits (32 x 151,936 floats, 19 MiB) and the update's activations come from
the heap, whose free holes it keeps. Fixing the threshold at 4 MiB sends every large block to its
own mapping, returned on free, and a low trim threshold gives back the heap's top; a trim
(`release`) after each step gives back free pages inside the heap as well.

What a person set wins: any MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_ in the environment
(glibc read them at start) leaves the policy alone. Not glibc (macOS, musl): nothing to do.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from functools import cache

MMAP_THRESHOLD = 4 << 20  # bytes: a block this large or larger gets its own mapping
TRIM_THRESHOLD = 64 << 20  # bytes of free heap top kept before glibc gives it back
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt's parameter numbers (malloc.h)
USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")


@cache
def _glibc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    if not all(hasattr(libc, f) for f in ("mallopt", "malloc_trim")):
        return None  # not glibc
    return libc


def keep_heap_small() -> str:
    """Set the thresholds once, at a run's start; returns the line a run logs."""
    libc = _glibc()
    if libc is None:
        return "heap: not glibc, left as it is"
    chosen = [name for name in USER_SETTINGS if name in os.environ]
    if chosen:
        return f"heap: left as {', '.join(chosen)} sets it"
    ok = libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) and libc.mallopt(
        _M_TRIM_THRESHOLD, TRIM_THRESHOLD
    )
    if not ok:
        return "heap: glibc refused the thresholds, left as it is"
    return (
        f"heap: blocks of {MMAP_THRESHOLD >> 20} MiB or more are mapped apart and returned on free"
    )


def release() -> bool:
    """Give the heap's free pages back to the kernel (glibc's malloc_trim); True if any went."""
    libc = _glibc()
    return bool(libc is not None and libc.malloc_trim(0))
