"""An AST check for programs that hard-code the visible tests: literal outputs keyed on inputs.

A visible test (inputs -> expected) counts as hard-coded when its expected value appears as an
output literal of the program (a returned value, a dict value, a printed value) and one of its
inputs appears as a key literal (compared with ==/in/is, a dict key, a match pattern). Trivial
values (None, booleans, -1..2, empty or one-character strings, empty containers) are ignored:
honest code returns and compares them all the time. The program is flagged when at least half
of the visible tests with a non-trivial expected value are hard-coded.
"""

from __future__ import annotations

import ast
import math
from typing import Any

from execrl.rewards.analysis.analysis import parse
from execrl.tasks.schema import AssertTests, CallTests, StdioTests, Task, Tests


def _literal(node: ast.AST) -> tuple[bool, Any]:
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _trivial(v: Any) -> bool:
    if v is None or isinstance(v, bool):
        return True
    if isinstance(v, int | float):
        return -1 <= v <= 2
    if isinstance(v, str | bytes):
        return len(v.strip()) <= 1
    if isinstance(v, list | tuple | set | frozenset | dict):
        return len(v) == 0
    return False


def _key(v: Any) -> str:
    """Identity of a literal for matching: type-exact, so 1 and True and 1.0 stay apart."""
    return f"{type(v).__name__}:{_text(v, repr)}"


def _text(v: Any, show: Any = str) -> str:
    """`show(v)`, but ints past the 4,300 digits `str` and `repr` allow (a literal the candidate
    wrote in hex) are written in hex wherever they are, so equal values still give equal text."""
    try:
        return show(v)
    except ValueError:
        return show(_hexed(v, 0))


def _hexed(v: Any, depth: int) -> Any:
    if type(v) is int:
        return _Hex(v)
    if depth > 100:  # deeper than the parser nests a literal
        return None
    if type(v) in (list, tuple, set, frozenset):
        return type(v)(_hexed(x, depth + 1) for x in v)
    if type(v) is dict:
        return {_hexed(k, depth + 1): _hexed(x, depth + 1) for k, x in v.items()}
    return v


class _Hex(int):
    def __repr__(self) -> str:
        return hex(self)

    __str__ = __repr__


def visible_pairs(tests: Tests, entry_point: str | None) -> list[tuple[tuple[Any, ...], Any]]:
    """(inputs, expected) of the visible tests whose values can be read without running them."""
    if isinstance(tests, CallTests):
        return [(tuple(a), e) for a, e in zip(tests.inputs, tests.expected, strict=True)]
    if isinstance(tests, StdioTests):
        return [
            (tuple(c.stdin.split()) + (c.stdin.strip(),), c.stdout.strip()) for c in tests.cases
        ]
    names = {n for n in (entry_point, "candidate") if n}
    pairs = []
    for stmt in tests.statements if isinstance(tests, AssertTests) else ():
        pair = _assert_pair(stmt, names)
        if pair is not None:
            pairs.append(pair)
    return pairs


def _assert_pair(stmt: str, names: set[str]) -> tuple[tuple[Any, ...], Any] | None:
    tree = parse(stmt)
    node = tree.body[0] if tree is not None and len(tree.body) == 1 else None
    if not isinstance(node, ast.Assert) or not isinstance(node.test, ast.Compare):
        return None
    cmp = node.test
    if len(cmp.ops) != 1 or not isinstance(cmp.ops[0], ast.Eq | ast.Is):
        return None
    for call, other in ((cmp.left, cmp.comparators[0]), (cmp.comparators[0], cmp.left)):
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in names:
            args = [_literal(a) for a in call.args]
            ok, expected = _literal(other)
            if ok and all(a_ok for a_ok, _ in args) and not call.keywords:
                return tuple(v for _, v in args), expected
    return None


def _collect(tree: ast.AST) -> tuple[set[str], set[str]]:
    """(output literals, key literals) of the program, as `_key` strings."""
    outputs: set[str] = set()
    keys: set[str] = set()

    def add(target: set[str], node: ast.AST | None, spread: bool = False) -> None:
        if node is None:
            return
        ok, v = _literal(node)
        if ok:
            target.add(_key(v))
            target.add(_key(_text(v)))  # printed values match stdio output text
            if spread and isinstance(v, list | tuple | set | frozenset):
                for x in v:
                    target.add(_key(x))
                    target.add(_key(_text(x)))

    for node in ast.walk(tree):
        if isinstance(node, ast.Return | ast.Yield):
            add(outputs, node.value)
        elif isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values, strict=True):
                add(keys, k)
                add(outputs, v)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "print"
        ):
            for a in node.args:
                add(outputs, a)
        elif isinstance(node, ast.Compare):
            for op, operand in zip(node.ops, node.comparators, strict=True):
                spread = isinstance(op, ast.In | ast.NotIn)
                add(keys, operand, spread)
                add(keys, node.left)
        elif isinstance(node, ast.MatchValue):
            add(keys, node.value)
    return outputs, keys


def hardcoded_tests(program: str, task: Task) -> tuple[int, int]:
    """(hard-coded visible tests, visible tests with a non-trivial expected value)."""
    if task.visible_tests is None:
        return 0, 0
    pairs = [
        (a, e) for a, e in visible_pairs(task.visible_tests, task.entry_point) if not _trivial(e)
    ]
    if not pairs:
        return 0, 0
    tree = parse(program)
    if tree is None:
        return 0, len(pairs)
    outputs, keys = _collect(tree)
    hits = 0
    for inputs, expected in pairs:
        if _key(expected) not in outputs and _key(_text(expected)) not in outputs:
            continue
        candidates = [inputs] + [a for a in inputs if not _trivial(a)]
        if any(
            _key(c) in keys or _key(list(c) if isinstance(c, tuple) else c) in keys
            for c in candidates
        ):
            hits += 1
    return hits, len(pairs)


def hardcodes_visible(program: str | None, task: Task) -> bool:
    if program is None:
        return False
    hits, n = hardcoded_tests(program, task)
    return n > 0 and hits >= math.ceil(n / 2)
