"""`models.heap`: with the policy set, large freed blocks leave the process; without it, glibc
keeps them once its mmap threshold has risen (what grew a Qwen training run by 2 GiB a step)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from execrl.models import heap

pytestmark = pytest.mark.skipif(heap._glibc() is None, reason="glibc's allocator only")

# A freed 24 MiB mapped block raises glibc's threshold; then 40 blocks of 8 MiB come from the
# heap, all freed but the last, which pins the heap's top: the 312 MiB below it stay resident
# unless the blocks were mapped apart (the policy) or trimmed (`release`).
PROGRAM = textwrap.dedent(
    """
    import ctypes, importlib.util, os, sys
    spec = importlib.util.spec_from_file_location("heap", sys.argv[2])  # not execrl.models: torch
    heap = importlib.util.module_from_spec(spec); spec.loader.exec_module(heap)
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    def rss():
        return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") >> 20
    if sys.argv[1] in ("policy", "both"):
        heap.keep_heap_small()
    big = libc.malloc(24 << 20); ctypes.memset(big, 1, 24 << 20); libc.free(big)
    blocks = [libc.malloc(8 << 20) for _ in range(40)]
    for b in blocks:
        ctypes.memset(b, 1, 8 << 20)
    for b in blocks[:-1]:
        libc.free(b)
    if sys.argv[1] in ("trim", "both"):
        heap.release()
    print(rss())
    """
)


def _resident_mib(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", PROGRAM, mode, heap.__file__],
                         capture_output=True, text=True, check=True)  # fmt: skip
    return int(out.stdout.strip())


def test_freed_blocks_stay_resident_without_the_policy_and_leave_with_it() -> None:
    kept, policy, trimmed = _resident_mib("none"), _resident_mib("policy"), _resident_mib("trim")
    assert kept - policy > 250, (kept, policy)  # the 39 freed blocks: 312 MiB
    assert kept - trimmed > 250, (kept, trimmed)


def test_a_threshold_the_person_set_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "33554432")
    assert "left as MALLOC_MMAP_THRESHOLD_" in heap.keep_heap_small()


def test_the_policy_line_names_the_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in heap.USER_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    assert "4 MiB" in heap.keep_heap_small()
