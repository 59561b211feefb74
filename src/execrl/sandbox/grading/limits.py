"""Per-run resource limits."""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True, slots=True)
class Limits:
    wall_s: float = 3.0  # wall clock for one run (all its tests), enforced by the worker
    test_wall_s: float | None = None  # optional wall clock per test, on top of wall_s
    cpu_s: float | None = None  # CPU seconds (kernel rlimit); defaults to wall_s + 1
    # Address-space limit of each process of the run, and, where the host has a memory cgroup
    # (`memcg`), of all its processes' memory together with the output it has written and the
    # worker holds; both beside the worker's own size.
    memory_mb: int = 2048
    output_bytes: int = 1 << 20  # cap on stdout and on stderr each; over it is OUTPUT_LIMIT
    file_size_mb: int = 16  # largest file the program may write
    open_files: int = 64
    processes: int = 32  # threads, and processes with Job.allow_threads, of the run at once
    # Size of the run's scratch filesystem (the filesystem layer's tmpfs, the only place a run
    # may write; a worker resizes it between runs when a job asks for another size)
    scratch_mb: int = 64
    compile_wall_s: float = 10.0  # wall clock of the compile step (C, C++, Verilog), on its own

    def to_wire(self) -> dict[str, object]:
        # Every field is a number or None: no deep copy (`asdict`, 7 us of each job's request).
        return {name: getattr(self, name) for name in _FIELDS}

    @classmethod
    def from_wire(cls, data: dict[str, object]) -> Limits:
        return cls(**data)  # type: ignore[arg-type]


_FIELDS = tuple(f.name for f in fields(Limits))
