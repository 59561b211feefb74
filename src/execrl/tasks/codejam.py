"""Google Code Jam and Kick Start problems (google/coding-competitions-archive): whole programs
reading stdin, judged as the archive's problemtools default validator does: whitespace-separated
tokens, case-sensitive, and with `float_tolerance X` a numeric token passes if its absolute or
its relative error is at most X. Expected output is one `Case #i: ...` block per case, and the
`Case` and `#i:` tokens are compared like any other."""

from __future__ import annotations

import re
from pathlib import Path

from execrl.tasks.errors import TaskDataError
from execrl.tasks.limit_caps import capped
from execrl.tasks.schema import Compare, StdioCase, StdioTests, Task, TimeLimit
from execrl.tasks.sources import DataFile, field, make_task, read_records

CODEJAM = DataFile("codejam", "codejam_kickstart_stdio.jsonl.gz")
_TIME_LIMIT = re.compile(r"Time limit: ([\d.]+) seconds")


def compare_for(where: str, flags: str) -> Compare:
    words = flags.split()
    if not words:
        return Compare()
    if len(words) == 2 and words[0] == "float_tolerance":
        tol = float(words[1])
        return Compare(atol=tol, rtol=tol, either_tolerance=True)
    raise TaskDataError(f"{where}: output_validator_flags {flags!r} are not supported")


def _cases(where: str, rows: object) -> tuple[StdioCase, ...]:
    if not isinstance(rows, list):
        raise TaskDataError(f"{where}: tests should be a list")
    try:
        return tuple(StdioCase(r["input"], r["output"]) for r in rows)
    except (KeyError, TypeError) as exc:
        raise TaskDataError(f"{where}: a test lacks 'input' or 'output' ({exc})") from None


def read_codejam(path: Path) -> list[Task]:
    tasks = []
    for where, rec in read_records(path):
        statement = field(where, rec, "statement")
        cmp = compare_for(where, field(where, rec, "output_validator_flags"))
        hidden = _cases(where, field(where, rec, "tests", list))
        samples = _cases(where, rec.get("sample_tests") or [])
        limit = _TIME_LIMIT.search(statement)
        per_case = float(limit.group(1)) if limit else 20.0  # the archive's usual limit
        tasks.append(
            make_task(
                where,
                id=field(where, rec, "problem_id"),
                prompt=statement,
                tests=StdioTests(cases=hidden, compare=cmp),
                visible_tests=StdioTests(cases=samples, compare=cmp) if samples else None,
                time_limits={  # the statement's limit is data: capped (`limit_caps`)
                    "tests": TimeLimit(
                        **capped({"wall_s": per_case * len(hidden), "test_wall_s": per_case})
                    )
                },
                metadata={
                    "source": "codejam",
                    "name": rec.get("name"),
                    "contest": rec.get("source"),
                    "groups": [t.get("group") for t in rec["tests"]],
                    "omitted_groups": rec.get("omitted_groups") or [],
                    "has_images": bool(rec.get("has_images")),
                },
            )
        )
    return tasks
