"""Repair benchmarks: HumanEvalFix (HumanEvalPack Python, Muennighoff et al., 2023) and
QuixBugs (Lin et al., 2017, in OctoPack's single-file format). The prompt shows the buggy
program; the reference is the fix; the tests are the benchmark's own."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from execrl.tasks.errors import TaskDataError
from execrl.tasks.prompt_helpers import with_prompt_helpers
from execrl.tasks.schema import AssertTests, Task
from execrl.tasks.sources import DataFile, HubCopy, field, make_task, read_records

HUMANEVALFIX = DataFile(
    "humanevalfix",
    "humanevalpack-python.jsonl",
    hub=HubCopy("bigcode/humanevalpack", "python", splits=("test",)),
)
QUIXBUGS = DataFile("quixbugs", "quixbugs_python.jsonl")
# Programs whose tests need objects back (`Task.strict_returns` False); besides these, the
# graph and linked-list programs, whose tests define `Node`, return Node objects.
OBJECT_RETURNS = {
    "flatten": "a generator, which the tests turn into a list",
    "kheapsort": "a generator, which the tests turn into a list",
}


def _without_final_check(where: str, test: str, entry: str) -> str:
    """HumanEvalPack's tests end by calling `check(<entry>)`; the task calls it as a test."""
    stripped = test.rstrip()
    pattern = rf"\ncheck\({re.escape(entry)}\)$"
    if not re.search(pattern, "\n" + stripped):
        raise TaskDataError(f"{where}: the test does not end with check({entry})")
    return re.sub(pattern, "", "\n" + stripped)[1:] + "\n"


def read_humanevalfix(path: Path) -> list[Task]:
    tasks = []
    for where, rec in read_records(path):
        entry = field(where, rec, "entry_point")
        declaration = field(where, rec, "declaration")
        buggy = declaration + field(where, rec, "buggy_solution")
        # The declaration's helpers the tests call (`poly`, `encode_cyclic`) come with them.
        test = with_prompt_helpers(
            declaration, _without_final_check(where, field(where, rec, "test"), entry), entry
        )
        example_test = field(where, rec, "example_test")  # empty for 6 tasks
        examples = (
            with_prompt_helpers(
                declaration, _without_final_check(where, example_test, entry), entry
            )
            if example_test
            else None
        )
        number = field(where, rec, "task_id").split("/")[-1]
        tasks.append(
            make_task(
                where,
                # HumanEvalPack numbers its tasks Python/N; the numbers are HumanEval's.
                id=f"HumanEvalFix/{number}",
                prompt=f"Fix bugs in {entry}.\n\n{buggy}\n{test}",
                tests=AssertTests(setup=test, statements=("check(candidate)",)),
                visible_tests=AssertTests(setup=examples, statements=("check(candidate)",))
                if examples
                else None,
                entry_point=entry,
                reference=declaration + field(where, rec, "canonical_solution"),
                metadata={
                    "source": "humanevalfix",
                    "buggy_program": buggy,
                    "bug_type": rec.get("bug_type"),
                    "failure_symptoms": rec.get("failure_symptoms"),
                },
            )
        )
    return tasks


def split_test_script(where: str, tests: str) -> AssertTests:
    """QuixBugs tests are assert lines or a script of `def testN()` then `testN()` calls: each
    top-level assert or call is one test; code before the first is setup, and code between two
    tests runs with the test after it."""
    try:
        body = ast.parse(tests).body
    except SyntaxError as exc:
        raise TaskDataError(f"{where}: the tests do not parse: {exc}") from None
    lines = tests.split("\n")

    def source(a: ast.stmt, b: ast.stmt) -> str:
        return "\n".join(lines[a.lineno - 1 : b.end_lineno])

    is_test = [
        isinstance(n, ast.Assert) or (isinstance(n, ast.Expr) and isinstance(n.value, ast.Call))
        for n in body
    ]
    if not any(is_test):
        raise TaskDataError(f"{where}: the tests hold no assert and no test call")
    first = is_test.index(True)
    setup = source(body[0], body[first - 1]) if first else ""
    statements, start = [], first
    for i in range(first, len(body)):
        if is_test[i]:
            statements.append(source(body[start], body[i]))
            start = i + 1
    if start < len(body):  # trailing code after the last test still has to run
        statements[-1] += "\n" + source(body[start], body[-1])
    return AssertTests(setup=setup, statements=tuple(statements))


def read_quixbugs(path: Path) -> list[Task]:
    tasks = []
    for where, rec in read_records(path):
        name = field(where, rec, "name")
        buggy = field(where, rec, "buggy_program")
        tests = split_test_script(where, field(where, rec, "tests"))
        docstring = rec.get("docstring") or ""
        tasks.append(
            make_task(
                where,
                id=f"QuixBugs/{name}",
                prompt=f"Fix bugs in {name}.\n\n{buggy}\n{docstring}\n",
                tests=tests,
                entry_point=name,
                reference=field(where, rec, "solution"),
                metadata={"source": "quixbugs", "buggy_program": buggy},
                # The graph and linked-list programs return the tests' own Node objects.
                strict_returns="class Node" not in tests.setup and name not in OBJECT_RETURNS,
            )
        )
    return tasks
