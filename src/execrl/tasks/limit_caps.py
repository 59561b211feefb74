"""Caps on every limit read from a file: the one home of how large a run's limits may be.

A limit in a file is data, and a file can come from anyone: a contest record asked for 48 hours
and 976 GiB a test, a model directory's `execrl_eval.json` for 24 hours, 1 TB and 100,000
processes. Taken as given, one slow wrong answer holds a worker for a day (and passes), or asks
the host for memory it does not have. Every loader that reads limits from a file passes them
through `capped` before they become a `TimeLimit` or a `Limits`: task records (the contest
loaders' `scaled_limits`, `jsonl:` task files, Code Jam, EvalPlus), eval specs
(`rl.eval_spec`), configs (`[sandbox.limits]` of `execrl train`'s config and of a reward file).

Here, in the lowest layer, because task records need it; the field names are those of
`sandbox.grading.limits.Limits` (`TimeLimit` uses three of them), and a test holds the two
lists equal, so a new limit cannot go uncapped. A caller raises a cap only from what a person
typed (`?max_test_s=` on a benchmark's name), never from the file being capped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

MAX_TEST_S = 30.0  # one test's wall clock (a contest judge's limits, scaled, fit well under it)
MAX_MEMORY_MB = 4096  # a run's memory, and the scratch it may fill
MAX_WALL_S = 1800.0  # a whole run: every test of a task, 30 min


@dataclass(frozen=True, slots=True)
class LimitCaps:
    """The largest value each limit read from a file may have."""

    wall_s: float = MAX_WALL_S
    test_wall_s: float = MAX_TEST_S
    cpu_s: float = MAX_WALL_S
    memory_mb: int = MAX_MEMORY_MB
    output_bytes: int = 64 << 20
    file_size_mb: int = 256
    open_files: int = 4096
    processes: int = 256
    scratch_mb: int = MAX_MEMORY_MB
    compile_wall_s: float = 120.0


CAPS = LimitCaps()
CAPPED = tuple(f.name for f in fields(LimitCaps))


def capped(
    limits: Mapping[str, Any],
    caps: LimitCaps = CAPS,
    where: str = "",
    say: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """`limits` (by field name, as a file gave them) with each number over its cap (or NaN)
    lowered to the cap; None (no limit of its own) and other keys as they were. `say` (with
    `where`, the file and table) gets one line naming what was lowered."""
    out = dict(limits)
    lowered = []
    for name in CAPPED:
        value, cap = out.get(name), getattr(caps, name)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and not value <= cap:
            out[name] = cap
            lowered.append(f"{name} {value!r} to {cap!r}")
    if lowered and say is not None:
        say(f"execrl: {where}: limits over execrl's caps lowered: {', '.join(lowered)} "
            "(a file's limits are data: execrl.tasks.limit_caps)")  # fmt: skip
    return out
