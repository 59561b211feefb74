"""The contest-data benchmarks, named with the data they read: `livecodebench:PATH`,
`apps:PATH`, `taco:PATH`, `codecontests:PATH`, `kodcode:PATH`, `primeintellect:PATH`, each PATH a
file of the dataset's upstream records (JSONL, JSONL.gz, a JSON array, or parquet), options
after a `?` (`contest_source`), or `hf` / `hf:OWNER/NAME@SPLIT` to read through `datasets`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

# the modules themselves, not the package: its __init__ reaches this module through registry
import execrl.tasks.apps as apps
import execrl.tasks.codecontests as codecontests
import execrl.tasks.kodcode as kodcode
import execrl.tasks.livecodebench as livecodebench
import execrl.tasks.primeintellect as primeintellect
from execrl.tasks.contest_source import HubSource, Record, load_records, parse_spec
from execrl.tasks.errors import TaskDataError
from execrl.tasks.schema import Task


@dataclass(frozen=True, slots=True)
class PathBenchmark:
    name: str
    description: str
    read: Callable[[list[Record], dict[str, str]], list[Task]]
    options: tuple[str, ...]  # what may follow the `?` of NAME:PATH
    hub: HubSource  # the copy `NAME:hf` reads


PATH_BENCHMARKS: dict[str, PathBenchmark] = {
    b.name: b
    for b in (
        PathBenchmark(
            "livecodebench",
            "LiveCodeBench code generation, stdin and LeetCode functional (?since=&until=)",
            livecodebench.read_livecodebench,
            livecodebench.OPTIONS,
            livecodebench.HUB,
        ),
        PathBenchmark(
            "apps", "APPS, stdin and call-based (?difficulty=)", apps.read_apps, apps.OPTIONS,
            apps.APPS_HUB,
        ),
        PathBenchmark(
            "taco", "TACO, APPS' layout (?difficulty=)", apps.read_taco, apps.OPTIONS, apps.TACO_HUB
        ),
        PathBenchmark(
            "codecontests",
            "DeepMind CodeContests, stdin (?tests=public,private,generated)",
            codecontests.read_codecontests,
            codecontests.OPTIONS,
            codecontests.HUB,
        ),
        PathBenchmark(
            "kodcode", "KodCode, pytest tests (?subset=)", kodcode.read_kodcode, kodcode.OPTIONS,
            kodcode.HUB,
        ),
        PathBenchmark(
            "primeintellect",
            "PrimeIntellect verifiable-coding-problems (?source=)",
            primeintellect.read_primeintellect,
            primeintellect.OPTIONS,
            primeintellect.HUB,
        ),
    )
}  # fmt: skip


def is_path_benchmark(name: str) -> bool:
    return name.partition(":")[0] in PATH_BENCHMARKS


def load_path_benchmark(name: str) -> list[Task]:
    """The tasks of `NAME:PATH[?options]`; ids must be unique within the file."""
    bench_name, sep, rest = name.partition(":")
    bench = PATH_BENCHMARKS[bench_name]
    if not sep:
        raise TaskDataError(
            f"{bench_name}: name the data, {bench_name}:PATH (a file of upstream records) or "
            f"{bench_name}:hf (download through `datasets`)"
        )
    spec = parse_spec(bench_name, rest, bench.options)
    tasks = bench.read(load_records(bench_name, spec, bench.hub), spec.options)
    seen: set[str] = set()
    for task in tasks:
        if task.id in seen:
            raise TaskDataError(f"{bench_name}:{spec.source}: task id {task.id!r} appears twice")
        seen.add(task.id)
    return tasks
