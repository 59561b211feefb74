"""Where a run's resident memory goes, every few seconds: an execrl command run in this process
with a thread that logs the resident set (anonymous and file-backed), the high-water mark and
glibc's heap (`mallinfo2`: the heap's size, what is in use, what is free but kept, and the large
blocks mapped apart). Free-but-kept heap is what `models.heap` hands back.

    EXECRL_DATA_DIR=../shared/data .venv-vllm/bin/python benchmarks/memory_watch.py \\
        --log runs/mem.log -- train --config configs/qwen2.5-coder-0.5b-cpu.toml \\
        --set run.steps=3 --set data.n_heldout=0

docs/results/qwen-cpu.md ("Memory") has what it showed on Qwen2.5-Coder-0.5B.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import sys
import threading
import time
from pathlib import Path

GIB = float(1 << 30)
STATUS = ("VmRSS", "RssAnon", "RssFile", "VmHWM")


class MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )  # fmt: skip
    ]


def _status() -> dict[str, float]:
    found = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in STATUS:
            found[key] = int(value.split()[0]) * 1024 / GIB
    return found


def _line(start: float, mallinfo2) -> str:
    s = _status()
    text = (f"{time.monotonic() - start:7.0f}s rss {s['VmRSS']:.2f} anon {s['RssAnon']:.2f} "
            f"file {s['RssFile']:.2f} hwm {s['VmHWM']:.2f}")  # fmt: skip
    if mallinfo2 is not None:
        m = mallinfo2()
        text += (f" | heap {m.arena / GIB:.2f} in use {m.uordblks / GIB:.2f} "
                 f"free {m.fordblks / GIB:.2f} mapped apart {m.hblkhd / GIB:.2f}")  # fmt: skip
    return text + " GiB"


def watch(log: Path, every: float) -> None:
    name = ctypes.util.find_library("c")
    libc = ctypes.CDLL(name) if name else None
    mallinfo2 = getattr(libc, "mallinfo2", None)
    if mallinfo2 is not None:
        mallinfo2.restype = MallInfo2
    start = time.monotonic()

    def loop() -> None:
        with log.open("w") as out:
            while True:
                out.write(_line(start, mallinfo2) + "\n")
                out.flush()
                time.sleep(every)

    threading.Thread(target=loop, daemon=True).start()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log", type=Path, required=True, help="where the readings go")
    parser.add_argument("--every", type=float, default=5.0, help="seconds between readings")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then execrl's arguments")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the execrl command after --, e.g. -- train --config C")
    watch(args.log, args.every)
    from execrl.cli import main as execrl

    return execrl(command)


if __name__ == "__main__":
    sys.exit(main())
