"""Whether two training runs are the same run: their metrics.jsonl rows equal field by field
(measures of the machine aside: timings and memory, `rl.metrics.MACHINE_KEYS`) and their
summaries equal (wall time and run directory aside).

    python benchmarks/same_runs.py BEFORE_RUN_DIR AFTER_RUN_DIR [MORE_PAIRS ...]

A restructure that must change nothing numerically (issue 30, "one rollout path") is checked
with it: run the same `execrl train` command on the code before and after, compare. Exits 1
and names every field that differs when any pair is not the same run.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from execrl.rl.metrics import of_the_run

SUMMARY_TIMINGS = ("seconds", "run_dir")


def rows(run: Path) -> list[dict[str, Any]]:
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [of_the_run(json.loads(x)) for x in lines]


def summary(run: Path) -> dict[str, Any]:
    every = json.loads((run / "summary.json").read_text())
    return {k: v for k, v in every.items() if k not in SUMMARY_TIMINGS}


def differences(before: Path, after: Path) -> list[str]:
    """Each field that differs, as a line; empty when the runs are the same."""
    out = []
    a, b = rows(before), rows(after)
    if len(a) != len(b):
        out.append(f"metrics.jsonl: {len(a)} rows before, {len(b)} after")
    for x, y in zip(a, b, strict=False):
        for key in sorted(set(x) | set(y)):
            if x.get(key) != y.get(key):
                out.append(f"step {x.get('step')}: {key} {x.get(key)!r} -> {y.get(key)!r}")
    s, t = summary(before), summary(after)
    for key in sorted(set(s) | set(t)):
        if s.get(key) != t.get(key):
            out.append(f"summary.json: {key} {s.get(key)!r} -> {t.get(key)!r}")
    return out


def main(argv: list[str]) -> int:
    if len(argv) < 2 or len(argv) % 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    same = True
    for before, after in zip(argv[::2], argv[1::2], strict=True):
        found = differences(Path(before), Path(after))
        n = len(rows(Path(before)))
        verdict = "the same run" if not found else f"{len(found)} differences"
        print(f"{before} vs {after}: {n} steps, {verdict}")
        for line in found:
            print(f"    {line}")
        same = same and not found
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
