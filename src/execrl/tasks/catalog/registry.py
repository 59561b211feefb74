"""Benchmarks by name: `load_benchmark("mbpp+")`, `list_benchmarks()`.

Names: humaneval, humaneval+, mbpp, mbpp-train, mbpp-full, mbpp-sanitized, mbpp+, humanevalfix, quixbugs,
codejam, synthetic[:key=value,...] (see `execrl.tasks.synthetic`), jsonl:PATH (a file in
HumanEval's format or in execrl's own schema, told apart by its first record), and the contest
datasets read from their upstream files: livecodebench:PATH, apps:PATH, taco:PATH,
codecontests:PATH, kodcode:PATH, primeintellect:PATH (`execrl.tasks.contest_registry`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from execrl.tasks.codejam import CODEJAM, read_codejam
from execrl.tasks.contest_registry import (
    PATH_BENCHMARKS,
    is_path_benchmark,
    load_path_benchmark,
)
from execrl.tasks.errors import DataNotFound, NoSuchTask, TaskDataError, UnknownBenchmark
from execrl.tasks.evalplus import HUMANEVAL_PLUS, MBPP_PLUS, load_evalplus
from execrl.tasks.humaneval import HUMANEVAL, humaneval_task, is_humaneval_record, read_humaneval
from execrl.tasks.jsonl import SCHEMA_NAME, read_tasks
from execrl.tasks.mbpp import MBPP_FULL, MBPP_SANITIZED, read_mbpp, read_mbpp_sanitized
from execrl.tasks.reference_runs import ReferenceRunner
from execrl.tasks.repair import HUMANEVALFIX, QUIXBUGS, read_humanevalfix, read_quixbugs
from execrl.tasks.schema import Task
from execrl.tasks.sources import DataFile, Found, locate, read_records
from execrl.tasks.suites import is_suite, load_suite


@dataclass(frozen=True, slots=True)
class Benchmark:
    name: str
    description: str
    data: DataFile | None  # None: generated, needs no data
    count: int | None  # tasks in the official release, where fixed
    read: Callable[..., list[Task]]
    needs_reference_runs: bool = False  # expected outputs come from running the references


BENCHMARKS: dict[str, Benchmark] = {
    b.name: b
    for b in (
        Benchmark("humaneval", "OpenAI HumanEval", HUMANEVAL, 164, lambda p: read_humaneval(p)),
        Benchmark(
            "humaneval+",
            "EvalPlus HumanEval+ v0.1.10 (base and plus tests)",
            HUMANEVAL_PLUS,
            164,
            lambda p, **kw: load_evalplus(p, "humaneval", "humaneval+", **kw),
            needs_reference_runs=True,
        ),
        Benchmark("mbpp", "MBPP test split (ids 11-510)", MBPP_FULL, 500, lambda p: read_mbpp(p, "test")),
        Benchmark("mbpp-train", "MBPP train split (ids 601-974)", MBPP_FULL, 374, lambda p: read_mbpp(p, "train")),
        Benchmark("mbpp-full", "MBPP, all tasks", MBPP_FULL, 974, lambda p: read_mbpp(p, None)),
        Benchmark("mbpp-sanitized", "MBPP hand-verified subset", MBPP_SANITIZED, 427, read_mbpp_sanitized),
        Benchmark(
            "mbpp+",
            "EvalPlus MBPP+ v0.2.0 (base and plus tests)",
            MBPP_PLUS,
            378,
            lambda p, **kw: load_evalplus(p, "mbpp", "mbpp+", **kw),
            needs_reference_runs=True,
        ),
        Benchmark("humanevalfix", "HumanEvalPack Python: repair a buggy function", HUMANEVALFIX, 164, read_humanevalfix),
        Benchmark("quixbugs", "QuixBugs Python: repair a one-line bug", QUIXBUGS, 40, read_quixbugs),
        Benchmark("codejam", "Code Jam / Kick Start, stdin/stdout", CODEJAM, 511, read_codejam),
    )
}  # fmt: skip


def list_benchmarks() -> list[Benchmark]:
    """Every registered benchmark (synthetic and jsonl:PATH are named, not listed)."""
    return list(BENCHMARKS.values())


def locate_benchmark(
    name: str, data_dir: str | Path | None = None, download: bool = True
) -> Found | None:
    if is_suite(name):
        return None  # generated
    b = _get(name)
    return locate(b.data, data_dir, download) if b.data else None


def load_benchmark(
    name: str,
    data_dir: str | Path | None = None,
    *,
    ids: Collection[str] | None = None,
    reference_runner: ReferenceRunner | None = None,
) -> list[Task]:
    """The tasks of a benchmark, by name. `ids` keeps only those tasks (for the EvalPlus
    benchmarks it also limits which references are run). EvalPlus expected outputs not yet
    cached are computed by `reference_runner`, which runs the references (this layer cannot:
    pass `execrl.sandbox.reference_runner.sandbox_runner()`); without one they are an error."""
    if name.startswith("jsonl:"):
        _FILES_READ.add(str(Path(name[len("jsonl:") :]).resolve()))
        tasks = read_jsonl_tasks(Path(name[len("jsonl:") :]))
    elif is_path_benchmark(name):  # livecodebench:PATH, apps:PATH, ... (contest_registry)
        source = name.partition(":")[2].partition("?")[0]
        if source and source != "hf" and not source.startswith("hf:"):
            _FILES_READ.add(str(Path(source).resolve()))
        tasks = load_path_benchmark(name)
    elif is_suite(name):  # verilog, sql, chart, optimize[:opts] (execrl.tasks.suites)
        tasks = load_suite(name, data_dir)
    elif name == "synthetic" or name.startswith("synthetic:"):
        from execrl.tasks.synthetic import load_synthetic

        tasks = load_synthetic(name.partition(":")[2])
    else:
        b = _get(name)
        assert b.data is not None
        path = locate(b.data, data_dir).path
        if b.needs_reference_runs:
            return b.read(path, ids=ids, runner=reference_runner)
        tasks = b.read(path)
        if b.count is not None and ids is None and len(tasks) != b.count:
            raise TaskDataError(f"{path}: {name} should have {b.count} tasks, found {len(tasks)}")
    if ids is not None:
        by_id = {t.id: t for t in tasks}
        missing = [i for i in ids if i not in by_id]
        if missing:
            raise NoSuchTask(name, missing[0], [t.id for t in tasks])
        tasks = [t for t in tasks if t.id in set(ids)]
    return tasks


# Files named by path (jsonl:PATH, apps:PATH, ...) this process loaded tasks from: they hold
# hidden tests wherever they lie, so what must not read tests hides them (`files_read`).
_FILES_READ: set[str] = set()


def files_read() -> list[str]:
    """Every task file named by its path that this process has loaded, as absolute paths."""
    return sorted(_FILES_READ)


def read_jsonl_tasks(path: Path) -> list[Task]:
    """A tasks file in execrl's schema or HumanEval's format, told apart by the first record."""
    if not path.is_file():
        raise DataNotFound(f"{path}: no such tasks file")
    rows = read_records(path)
    first: dict[str, Any] = rows[0][1]
    if first.get("schema") == SCHEMA_NAME:
        return read_tasks(path)
    if is_humaneval_record(first):
        return [humaneval_task(where, rec, f"jsonl:{path}") for where, rec in rows]
    raise TaskDataError(
        f"{rows[0][0]}: neither an execrl task (a 'schema': {SCHEMA_NAME!r} field) nor a "
        "HumanEval record (task_id, prompt, test, entry_point)"
    )


def known_sources() -> str:
    """Every name a task source may have, as the commands that take one (`execrl eval
    --benchmark`, `execrl train`'s data.train) list it: one list, not one for each."""
    from execrl.tasks.suites import SUITES

    paths = [f"{n}:PATH" for n in PATH_BENCHMARKS]
    suites = [f"{n}[:opts]" for n in ("synthetic", *SUITES)]
    return ", ".join([*BENCHMARKS, *suites, "jsonl:PATH", *paths])


def _get(name: str) -> Benchmark:
    if name not in BENCHMARKS:
        raise UnknownBenchmark(f"unknown benchmark {name!r}; known: {known_sources()}")
    return BENCHMARKS[name]
