"""Procedural suites for the domain verifiers (docs/verifiers.md): `verilog`, `sql`, `chart`,
`optimize`, `testgen`, each with difficulty levels 1-3, a train/test split and a reference solution and a
wrong solution per task.

    load_suite("sql")                                  # the train split, every level
    load_suite("sql:split=test,difficulty=2,n=4,seed=0")

`n` is the number of tasks per level. A task's split is a hash of its prompt, so no held-out
prompt is ever a training prompt (a split by the whole task put a third of the sql suite's
held-out prompts in the train split too: the database a query runs on is not in its prompt).
`optimize` and `verilog` are split by the whole task: optimize's prompts name the problem, not
the instance the program is graded on, by design, and verilog has too few distinct prompts
(about 60 at level 1, 15 at level 2, 6 at level 3) for a split by prompt, so their held-out
tasks repeat training prompts on other instances or test vectors. The seed picks which tasks
are drawn. Generation is
deterministic: the same name gives the same tasks.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from execrl.tasks.errors import UnknownBenchmark
from execrl.tasks.schema import Task, VerifierTests

SUITES = {
    "verilog": "Verilog modules simulated with Icarus Verilog against a Python reference model",
    "sql": "SQLite queries, result sets compared as Spider's execution accuracy",
    "chart": "matplotlib charts, scored by figure data and image similarity",
    "optimize": "knapsack and scheduling solvers, feasibility then gap to the best known value",
    "diagram": "Graphviz DOT and TikZ diagrams, scored by rendered structure and image similarity",
    "testgen": "test suites for MBPP and HumanEval functions, scored by the mutants they reject",
    "web": "web pages (HTML, CSS, JavaScript) driven in headless Chromium: structure, function, looks",
}
LEVELS = (1, 2, 3)
SPLITS = ("train", "test")
TEST_FRACTION = 4  # one task identity in 4 is held out for test
DEFAULT_N = 8  # tasks per level
GIVE_UP_AFTER = 5_000  # draws per level before the space is taken as used up
SPLIT_BY_INSTANCE = frozenset({"optimize", "verilog"})  # few prompts (see above)

# make(rng, level) -> a task (id filled in later), or None when the draw is unusable
Maker = Callable[[random.Random, int, Path | None], Task | None]  # rng, level, data dir


@dataclass(frozen=True, slots=True)
class SuiteOptions:
    split: str = "train"
    difficulty: int | None = None  # None: every level
    n: int = DEFAULT_N
    seed: int = 0


def is_suite(name: str) -> bool:
    return name.partition(":")[0] in SUITES


def parse_options(name: str) -> tuple[str, SuiteOptions]:
    """ "sql:split=test,n=4" -> ("sql", SuiteOptions(...)); errors name the bad option."""
    suite, _, text = name.partition(":")
    if suite not in SUITES:
        raise UnknownBenchmark(f"unknown suite {suite!r}; known: {', '.join(SUITES)}")
    values: dict[str, str] = {}
    for part in filter(None, text.split(",")):
        key, sep, value = part.partition("=")
        if not sep or key not in ("split", "difficulty", "n", "seed"):
            raise UnknownBenchmark(
                f"{name}: bad option {part!r}; options are split=train|test, "
                "difficulty=1|2|3, n=TASKS_PER_LEVEL, seed=INT"
            )
        values[key] = value
    try:
        options = SuiteOptions(
            split=values.get("split", "train"),
            difficulty=int(values["difficulty"]) if "difficulty" in values else None,
            n=int(values.get("n", DEFAULT_N)),
            seed=int(values.get("seed", 0)),
        )
    except ValueError:
        raise UnknownBenchmark(f"{name}: difficulty, n and seed must be integers") from None
    if options.split not in SPLITS or options.n < 1:
        raise UnknownBenchmark(f"{name}: split must be train or test, and n at least 1")
    if options.difficulty is not None and options.difficulty not in LEVELS:
        raise UnknownBenchmark(f"{name}: difficulty must be one of {LEVELS}")
    return suite, options


def load_suite(name: str, data_dir: str | Path | None = None) -> list[Task]:
    """The tasks a suite name stands for (see the module docstring); a suite built from a
    benchmark's data (`testgen`) reads it from `data_dir` when one is given."""
    suite, options = parse_options(name)
    make: Maker = importlib.import_module(f"execrl.tasks.suites.{suite}").make
    levels = LEVELS if options.difficulty is None else (options.difficulty,)
    tasks: list[Task] = []
    for level in levels:
        tasks.extend(
            _level(suite, make, level, options, None if data_dir is None else Path(data_dir))
        )
    return tasks


def _level(suite: str, make: Maker, level: int, options: SuiteOptions,
           data_dir: Path | None) -> list[Task]:  # fmt: skip
    rng = random.Random(f"{suite}:{options.seed}:{level}")
    seen: set[str] = set()
    out: list[Task] = []
    for _ in range(GIVE_UP_AFTER):
        task = make(rng, level, data_dir)
        if task is None:
            continue
        ident = identity(task)
        key = ident if suite in SPLIT_BY_INSTANCE else _prompt_key(task)
        if ident in seen or split_of(key) != options.split:
            continue
        seen.add(ident)
        metadata = {"source": suite, "difficulty": level, "split": options.split}
        task_id = f"{suite}/{options.split}/{level}/{len(out)}"
        out.append(replace(task, id=task_id, metadata={**task.metadata, **metadata}))
        if len(out) == options.n:
            return out
    raise UnknownBenchmark(
        f"{suite}: only {len(out)} distinct {options.split} tasks at difficulty {level}; "
        f"ask for n={len(out)} or fewer"
    )


def identity(task: Task) -> str:
    tests = task.tests
    spec = tests.spec if isinstance(tests, VerifierTests) else {}
    # What the model sees and what grades it; two references of one truth table are one task.
    blob = json.dumps([task.prompt, spec], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def _prompt_key(task: Task) -> str:
    return hashlib.sha256(task.prompt.encode()).hexdigest()


def split_of(ident: str) -> str:
    return "test" if int(ident[:8], 16) % TEST_FRACTION == 0 else "train"
