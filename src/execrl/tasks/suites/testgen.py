"""The `testgen` suite: the model writes the tests. A task shows a function's description and
signature (from MBPP's hand-verified subset and from HumanEval); the answer is a test suite
that calls the function by name, scored by the `testgen` verifier (docs/verifiers.md): it must
pass on the reference solution, then earns the fraction of wrong programs it rejects and the
reference's line coverage under it.

The wrong programs are mutants of the reference (`mutants.py`, at most MAX_MUTANTS a task,
chosen by the task's own seed) and, for HumanEval tasks, HumanEvalFix's buggy solution of the
same function (HumanEvalPack, Muennighoff et al. 2023: a human-written bug the benchmark's tests
catch). MBPP's data holds no known-wrong programs. The task's reference answer is the
benchmark's own tests (MBPP's asserts with their imports; HumanEval's `check` with the prompt's
helpers it calls), which score the maximum by construction of the score.

Levels by the size of the code under test (statements in its functions' bodies): level 1 up to
LEVEL_SIZES[0], level 2 up to LEVEL_SIZES[1], level 3 larger. Data: MBPP's
`sanitized-mbpp.json` and HumanEvalPack's `humanevalpack-python.jsonl` from the data directory
(`--data-dir`, else `EXECRL_DATA_DIR`), as `execrl tasks list` shows for `mbpp-sanitized` and `humanevalfix`.
"""

from __future__ import annotations

import ast
import functools
import random
import warnings
from dataclasses import dataclass, replace
from pathlib import Path

from execrl.tasks.errors import TaskDataError
from execrl.tasks.mbpp import MBPP_SANITIZED, called_function
from execrl.tasks.prompt_helpers import with_prompt_helpers
from execrl.tasks.repair import HUMANEVALFIX
from execrl.tasks.schema import Task, VerifierTests
from execrl.tasks.sources import data_dir_of, field, locate, read_records
from execrl.tasks.suites.mutants import (
    Mutant,
    mutants,
    normalise,
    pick,
    site_count,
    statement_count,
)
from execrl.tasks.suites.testgen_wrong import WRONG_KINDS, SuiteParts, wrong_suite

MAX_MUTANTS = 10
MIN_MUTANTS = 3  # a function with fewer mutation sites says too little about a suite
LEVEL_SIZES = (3, 7)
# The coverage replay runs the reference on the suite's arguments in the runner's trusted
# process (testgen_runner): a reference that runs its input as code (HumanEval/160's `eval`)
# would run the suite's code there, which could then report any coverage. Such functions are
# left out.
RUNS_CODE = frozenset({"eval", "exec", "compile", "__import__", "breakpoint"})

PROMPT = """Write a test suite for the Python function `{entry}` described below. The function \
is already defined when your tests run: do not define, import or stub it; call it by its name. \
Write plain `assert` statements, or `test_*` functions (or unittest.TestCase classes) that \
assert. Your suite runs against the correct function and against subtly wrong versions of it: \
it scores by passing on the correct one, failing on the wrong ones, and by how much of the \
correct one's code its calls run.

{description}

Answer with one Python code block holding only the tests."""


@dataclass(frozen=True, slots=True)
class Source:
    """A benchmark function to write tests for."""

    origin: str  # the benchmark task's id, e.g. "Mbpp/2", "HumanEval/0"
    entry: str
    description: str  # what the prompt shows: the description and the signature
    program: str  # the reference, normalised (`mutants.normalise`)
    functions: frozenset[str]  # the functions whose bodies are mutated
    reference_suite: str  # the benchmark's own tests
    known_wrong: tuple[str, ...]  # wrong programs the benchmark holds, normalised


def make(rng: random.Random, level: int, data_dir: Path | None = None) -> Task | None:
    pool = _pool(data_dir_of(data_dir))[level]  # cached by the directory, not by the flag
    if not pool:
        return None
    source = rng.choice(pool)
    return task_for(source, rng.choice(WRONG_KINDS))


def task_for(source: Source, wrong_kind: str) -> Task:
    """The task for `source`, with the wrong answer `wrong_kind` (one of WRONG_KINDS) for
    `execrl tasks validate` to check."""
    task = _task(source)
    assert isinstance(task.tests, VerifierTests)
    wrong = wrong_suite(
        wrong_kind, SuiteParts(source.entry, source.program, source.reference_suite)
    )
    return replace(
        task,
        tests=replace(task.tests, wrong=wrong),
        metadata={**task.metadata, "wrong_kind": wrong_kind},
    )


@functools.cache
def _task(source: Source) -> Task:
    chosen = _mutants(source)
    spec = {
        "entry_point": source.entry,
        "reference_program": source.program,
        "mutants": [m.source for m in chosen],
        "mutant_operators": [m.operator for m in chosen],
        "known_wrong": list(source.known_wrong),
        "reference_suite": source.reference_suite,
    }
    return Task(
        id="",
        prompt=PROMPT.format(entry=source.entry, description=source.description),
        tests=VerifierTests("testgen", spec),
        entry_point=source.entry,
        reference=source.reference_suite,
        metadata={"benchmark_task": source.origin},
    )


def _mutants(source: Source) -> list[Mutant]:
    return pick(mutants(source.program, source.functions), MAX_MUTANTS, source.origin)


@functools.cache
def _pool(data_dir: Path | None) -> dict[int, list[Source]]:
    """The usable functions of both benchmarks by level, in the data's order, from `data_dir`
    (`execrl ... --data-dir`) or where `sources.locate` looks without one."""
    levels: dict[int, list[Source]] = {1: [], 2: [], 3: []}
    with warnings.catch_warnings():  # MBPP's code has invalid escapes ("\w") in plain strings
        warnings.simplefilter("ignore", (DeprecationWarning, SyntaxWarning))
        sources = [*_mbpp(data_dir), *_humaneval(data_dir)]
    for source in sources:
        if site_count(source.program, source.functions) < MIN_MUTANTS or _runs_code(source):
            continue
        size = statement_count(source.program, source.functions)
        level = 1 if size <= LEVEL_SIZES[0] else 2 if size <= LEVEL_SIZES[1] else 3
        levels[level].append(source)
    return levels


def _runs_code(source: Source) -> bool:
    tree = ast.parse(source.program)
    return any(isinstance(n, ast.Name) and n.id in RUNS_CODE for n in ast.walk(tree))


def _mbpp(data_dir: Path | None) -> list[Source]:
    found = []
    for where, rec in read_records(locate(MBPP_SANITIZED, data_dir).path):
        code = field(where, rec, "code").replace("\r\n", "\n")
        tests = tuple(field(where, rec, "test_list", list))
        entry = called_function(code, tests)
        try:
            tree = ast.parse(code)
        except SyntaxError:
            continue
        defs = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
        signature = next((n for n in defs if n.name == entry), None)
        if entry is None or signature is None:
            continue  # the tests call a class, or nothing the code defines
        stub = ast.FunctionDef(signature.name, signature.args, [ast.Expr(ast.Constant(...))], [])
        header = ast.unparse(ast.fix_missing_locations(ast.Module([stub], [])))
        imports = "\n".join(field(where, rec, "test_imports", list))
        found.append(
            Source(
                origin=f"Mbpp/{field(where, rec, 'task_id', int)}",
                entry=entry,
                description=f"{field(where, rec, 'prompt').strip()}\n\n```python\n{header}\n```",
                program=normalise(code),
                functions=frozenset(n.name for n in defs),
                reference_suite=f"{imports}\n" + "\n".join(tests) + "\n",
                known_wrong=(),
            )
        )
    return found


def _humaneval(data_dir: Path | None) -> list[Source]:
    found = []
    for where, rec in read_records(locate(HUMANEVALFIX, data_dir).path):
        entry = field(where, rec, "entry_point")
        prompt = field(where, rec, "prompt")
        program = normalise(prompt + field(where, rec, "canonical_solution"))
        try:
            # The buggy solution under the same prompt: the same docstring and module names as
            # the reference, so only its behaviour differs.
            buggy = normalise(prompt + field(where, rec, "buggy_solution"))
        except SyntaxError:
            raise TaskDataError(f"{where}: the buggy solution does not parse") from None
        given = {n.name for n in ast.parse(prompt).body if isinstance(n, ast.FunctionDef)}
        defined = {n.name for n in ast.walk(ast.parse(program)) if isinstance(n, ast.FunctionDef)}
        test = field(where, rec, "test")
        number = field(where, rec, "task_id").split("/")[-1]
        found.append(
            Source(
                origin=f"HumanEval/{number}",
                entry=entry,
                description=f"```python\n{prompt.strip()}\n```",
                program=program,
                # The prompt's helpers (`poly`) are given, not written: only the solution varies.
                functions=frozenset(defined - given | {entry}),
                reference_suite=with_prompt_helpers(prompt, test, entry).rstrip() + "\n",
                known_wrong=(buggy,) if buggy != program else (),
            )
        )
    return found
