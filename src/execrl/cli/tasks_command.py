"""`execrl tasks list | show ID | validate BENCH`.

In the eval layer because showing an EvalPlus task may first run its reference in the sandbox
(its expected outputs), and `validate` runs every reference there.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from execrl.eval.validate import validate
from execrl.sandbox import sandbox_runner
from execrl.tasks.catalog.registry import (
    Benchmark,
    list_benchmarks,
    load_benchmark,
    locate_benchmark,
)
from execrl.tasks.contest_registry import PATH_BENCHMARKS
from execrl.tasks.defects import KNOWN_DEFECTS
from execrl.tasks.errors import DataNotFound, NoSuchTask, TaskDataError, UnknownBenchmark
from execrl.tasks.jsonl import task_to_dict
from execrl.tasks.schema import AssertTests, CallTests, Task, VerifierTests
from execrl.tasks.sources import DATA_DIR_ENV, data_dir_of, wanted_path
from execrl.tasks.suites import DEFAULT_N, LEVELS, SUITES

# Task-id prefixes that name their benchmark, for `show` without --benchmark.
ID_PREFIXES = {
    "HumanEval/": "humaneval",
    "Mbpp/": "mbpp-full",
    "HumanEvalFix/": "humanevalfix",
    "QuixBugs/": "quixbugs",
    "codejam": "codejam",
    "kickstart": "codejam",
    "farewell": "codejam",
    # the verifier suites (execrl.tasks.suites): default n; pass --benchmark for other options
    **{f"{s}/train/": s for s in SUITES},
    **{f"{s}/test/": f"{s}:split=test" for s in SUITES},
}


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("tasks", help="list, show and validate benchmark tasks")
    sub = p.add_subparsers(dest="tasks_command", metavar="ACTION", required=True)
    data = argparse.ArgumentParser(add_help=False)
    data.add_argument(
        "--data-dir",
        help="benchmark data laid out as DIR/<dataset>/<file> (default: $EXECRL_DATA_DIR)",
    )

    ls = sub.add_parser("list", parents=[data], help="benchmarks, task counts, where the data is")
    ls.set_defaults(handler=cmd_list)

    show = sub.add_parser("show", parents=[data], help="print one task")
    show.add_argument("id", help="task id, e.g. HumanEval/0 or Mbpp/2")
    show.add_argument("--benchmark", "-b", help="benchmark name (default: from the id)")
    show.add_argument("--json", action="store_true", help="the whole task in execrl's JSONL schema")
    show.set_defaults(handler=cmd_show)

    val = sub.add_parser(
        "validate", parents=[data], help="run every reference solution against its tests"
    )
    val.add_argument("benchmark", help="benchmark name, synthetic:..., or jsonl:PATH")
    val.add_argument("--workers", type=int, default=2, help="sandbox workers")
    val.set_defaults(handler=cmd_validate)


def _fail(message: str) -> int:
    print(f"execrl tasks: error: {message}", file=sys.stderr)
    return 2


def cmd_list(args: argparse.Namespace) -> int:
    root = data_dir_of(args.data_dir)
    missing: list[Benchmark] = []
    rows: list[tuple[str, object, str]] = [("benchmark", "tasks", "data")]
    for b in list_benchmarks():
        try:
            found = locate_benchmark(b.name, args.data_dir, download=False)
            where = f"{found.path} ({found.origin})" if found else "generated"
        except DataNotFound:
            assert b.data is not None  # only a benchmark read from a file can be missing
            missing.append(b)
            where = f"MISSING: put {b.data.filename} at {wanted_path(b.data, root)}"
        rows.append((b.name, b.count or "-", where))
    rows.append(("synthetic", "any", "generated (synthetic:split=train,difficulty=1,n=100,seed=0)"))
    rows.append(("jsonl:PATH", "-", "a file in HumanEval's format or execrl's schema"))
    for name, what in SUITES.items():  # scored by verifiers (docs/verifiers.md)
        options = f"{name}:split=train|test,difficulty=1-3,n=8"
        rows.append((name, DEFAULT_N * len(LEVELS), f"generated ({options}): {what}"))
    for b in PATH_BENCHMARKS.values():  # read from the dataset's own files (contest_registry)
        rows.append((f"{b.name}:PATH", "-", f"{b.description}; PATH a JSONL/parquet file or hf"))
    width = max(len(name) for name, _, _ in rows)  # the longest name sets the column
    for name, count, text in rows:
        print(f"{name:<{width}} {count!s:>6}  {text}")
    if missing:
        print(_missing_note(missing, args.data_dir, root))
    return 0


def _missing_note(missing: list[Benchmark], flag: str | None, root: Path | None) -> str:
    """What a person sets or installs to give the MISSING benchmarks their data."""
    names = ", ".join(b.name for b in missing)
    if root is None:
        head = (f"\n{len(missing)} benchmarks have no data ({names}): no data directory is set. "
                f"Set {DATA_DIR_ENV}=DIR (or pass --data-dir DIR), DIR holding <dataset>/<file> "
                "as the rows above name them; README, Quickstart: where the data comes from.")  # fmt: skip
    else:
        source = "--data-dir" if flag else DATA_DIR_ENV
        head = (f"\n{len(missing)} benchmarks have no data ({names}) in {root} ({source}): put "
                "the files the rows above name there, or point it at the directory holding them.")  # fmt: skip
    online = [b.name for b in missing if b.data and b.data.hub]
    if online:
        head += (f" With the `datasets` package installed, a command that loads {', '.join(online)} "
                 "downloads its public copy on first use.")  # fmt: skip
    return head


def _summary(t: Any) -> str:
    if isinstance(t, AssertTests):
        return f"{len(t)} assert test(s)"
    if isinstance(t, CallTests):
        return f"{len(t)} call test(s), compare {t.compare}"
    if isinstance(t, VerifierTests):
        return f"the {t.verifier!r} verifier (docs/verifiers.md), spec keys {sorted(t.spec)}"
    return f"{len(t)} stdio case(s), compare {t.compare}"


def show_task(task: Task) -> str:
    lines = [
        f"id: {task.id}",
        f"entry point: {task.entry_point}",
        f"metadata: {_short(task.metadata)}",
    ]
    lines.append(f"tests: {_summary(task.tests)}")
    if task.base_tests is not None:
        lines.append(f"base tests: {_summary(task.base_tests)}")
    if task.visible_tests is not None:
        lines.append(f"visible tests: {_summary(task.visible_tests)}")
    for group, limit in task.time_limits.items():
        lines.append(
            f"time limit ({group}): {limit.wall_s:g}s per run, {limit.test_wall_s or '-'} per test"
        )
    lines += [
        "",
        "--- prompt ---",
        task.prompt.rstrip(),
        "",
        "--- reference ---",
        (task.reference or "(none)").rstrip(),
    ]
    t = task.tests
    if isinstance(t, CallTests):
        lines += ["", "--- first tests ---"] + [
            f"{task.entry_point}{_short(a)} -> {_short(e)}"
            for a, e in zip(t.inputs[:5], t.expected[:5], strict=True)
        ]
    elif isinstance(t, AssertTests):
        lines += ["", "--- tests ---", _short(t.setup, 1500)] + [
            _short(s) for s in t.statements[:10]
        ]
    return "\n".join(lines)


def _short(v: Any, n: int = 300) -> str:
    text = v if isinstance(v, str) else repr(v)
    return text if len(text) <= n else text[: n - 3] + "..."


def unknown_id_form(task_id: str) -> str:
    """Why `tasks show` cannot place an id: the forms it knows, and the id in the right case
    when only the case was wrong ("humaneval/1")."""
    fixed = [p + task_id[len(p) :] for p in ID_PREFIXES if task_id.lower().startswith(p.lower())]
    hint = f"did you mean {fixed[0]!r}? " if fixed else ""
    return (
        f"cannot tell the benchmark of {task_id!r}: {hint}ids start with "
        f"{', '.join(ID_PREFIXES)}; for another benchmark pass --benchmark NAME"
    )


def cmd_show(args: argparse.Namespace) -> int:
    bench = args.benchmark or next(
        (b for p, b in ID_PREFIXES.items() if args.id.startswith(p)), None
    )
    if bench is None:
        return _fail(unknown_id_form(args.id))
    try:
        ids = None if bench.startswith(("synthetic", "jsonl:")) else [args.id]
        loaded = load_benchmark(bench, args.data_dir, ids=ids, reference_runner=sandbox_runner())
    except (DataNotFound, TaskDataError, UnknownBenchmark, ValueError) as exc:
        return _fail(str(exc))
    tasks = [t for t in loaded if t.id == args.id]
    if not tasks:
        return _fail(str(NoSuchTask(bench, args.id, [t.id for t in loaded])))
    print(json.dumps(task_to_dict(tasks[0])) if args.json else show_task(tasks[0]))
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    try:
        tasks = load_benchmark(args.benchmark, args.data_dir, reference_runner=sandbox_runner())
    except (DataNotFound, TaskDataError, UnknownBenchmark, ValueError) as exc:
        return _fail(str(exc))
    no_ref = sum(1 for t in tasks if t.reference is None)
    try:
        failures = validate(tasks, workers=args.workers)
    except TaskDataError as exc:  # a task the sandbox cannot run (a verifier task's bad spec)
        return _fail(str(exc))
    known = KNOWN_DEFECTS.get(args.benchmark, {})
    new = [f for f in failures if f.task_id not in known]
    for f in failures:
        tag = f"known upstream defect: {known[f.task_id]}" if f.task_id in known else "FAILED"
        print(f"{f.task_id}: {f.verdict} {f.message} [{tag}]")
    ran = len(tasks) - no_ref
    print(
        f"{args.benchmark}: {ran - len(failures)}/{ran} reference solutions pass; "
        f"{len(failures) - len(new)} known defect(s), {len(new)} new failure(s)"
        + (f"; {no_ref} task(s) have no reference solution and were not run" if no_ref else "")
    )
    return 1 if new else 0
