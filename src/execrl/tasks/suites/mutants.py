"""Mutants of a reference program: small wrong versions made by operators on its AST, for the
`testgen` suite (docs/verifiers.md), where a test suite is scored by the mutants it rejects.

Operators (each site of each operator gives one mutant per variant):
- `compare`: a comparison operator swapped (< and <=, > and >=, == and !=, in and not in,
  is and is not);
- `arith`: an arithmetic operator swapped (+ and -, * and //, / and *, // and /, % and //),
  in expressions and augmented assignments;
- `boolean`: `and` and `or` swapped, a `not` dropped, True and False swapped;
- `constant`: an integer constant off by one (c + 1, c - 1);
- `return`: a returned value replaced by None;
- `remove`: a simple statement (assignment, call, augmented assignment) replaced by `pass`.

Only the bodies of the functions named in `functions` change: the module's own statements,
default argument values and docstrings stay as they are, so a mutant's module namespace,
defaults and docstrings equal the reference's and only the behaviour of its code differs (what
the sandbox lets a suite see of a function besides calling it). Every mutant keeps the
reference's line layout: each change stays within one line of `ast.unparse`'s output, so line
numbers in a traceback do not tell a mutant from the reference either.

Everything is deterministic: the same reference, functions and seed give the same mutants.
"""

from __future__ import annotations

import ast
import copy
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass

COMPARE_SWAPS: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
ARITH_SWAPS: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.FloorDiv,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Div,
    ast.Mod: ast.FloorDiv,
}
REMOVABLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr)
OPERATORS = ("compare", "arith", "boolean", "constant", "return", "remove")


@dataclass(frozen=True, slots=True)
class Mutant:
    operator: str  # one of OPERATORS
    line: int  # the line of the change in the normalised reference
    source: str  # the whole mutated program, as `ast.unparse` writes it


def normalise(source: str) -> str:
    """The program as `ast.unparse` writes it: the reference runs in this form, so that it and
    its mutants share one layout (no comments, one statement a line)."""
    return ast.unparse(ast.parse(source)) + "\n"


def mutants(source: str, functions: frozenset[str]) -> list[Mutant]:
    """Every mutant of `source` (normalised first) whose change lies in the body of a function
    named in `functions` (at any depth), each distinct from the reference and the others."""
    reference = normalise(source)
    tree = ast.parse(reference)
    seen = {reference}
    found: list[Mutant] = []
    for path, operator, apply in _sites(tree, functions):
        mutated = copy.deepcopy(tree)
        node = _follow(mutated, path)
        line = getattr(node, "lineno", 0)
        _put(mutated, path, ast.copy_location(apply(node), node))
        text = ast.unparse(ast.fix_missing_locations(mutated)) + "\n"
        if text in seen or text.count("\n") != reference.count("\n"):
            continue
        seen.add(text)
        found.append(Mutant(operator, line, text))
    return found


def pick(found: list[Mutant], limit: int, seed: str) -> list[Mutant]:
    """At most `limit` mutants, spread over the operators: one of each operator in turn, in an
    order shuffled by `seed` (the task's identity), so a task always gets the same ones."""
    rng = random.Random(seed)
    by_operator = {op: [m for m in found if m.operator == op] for op in OPERATORS}
    for group in by_operator.values():
        rng.shuffle(group)
    chosen: list[Mutant] = []
    while len(chosen) < limit and any(by_operator.values()):
        for op in OPERATORS:
            if by_operator[op] and len(chosen) < limit:
                chosen.append(by_operator[op].pop())
    return sorted(chosen, key=lambda m: (m.line, m.operator, m.source))


def site_count(source: str, functions: frozenset[str]) -> int:
    """How many mutants `mutants` could make at most (before dropping duplicates): cheap."""
    return sum(1 for _ in _sites(ast.parse(normalise(source)), functions))


def statement_count(source: str, functions: frozenset[str]) -> int:
    """Statements in the bodies of `functions`: the size a task's difficulty is read from."""
    tree = ast.parse(source)
    return sum(
        1
        for fn in _functions(tree, functions)
        for node in ast.walk(fn)
        if isinstance(node, ast.stmt) and node is not fn and not _is_docstring(node)
    )


Path = tuple[tuple[str, int | None], ...]  # fields (and list indices) from a root node
# A site: the path to a node (fields and indices from the module), the operator's name and the
# change to make to the node found there.
Change = Callable[[ast.AST], ast.AST]  # the node -> what replaces it
Site = tuple[Path, str, Change]


def _sites(tree: ast.Module, functions: frozenset[str]) -> Iterator[Site]:
    for fn in _functions(tree, functions):
        fn_path = _path_to(tree, fn)
        for stmt in fn.body:
            for node, rel in _walk_with_paths(stmt, ()):
                path = fn_path + (("body", fn.body.index(stmt)),) + rel
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                    continue  # nested functions are walked on their own (if named)
                yield from _node_sites(node, path)


def _node_sites(node: ast.AST, path: Path) -> Iterator[Site]:
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            if type(op) in COMPARE_SWAPS:
                yield path, "compare", _set_compare(i, COMPARE_SWAPS[type(op)])
    elif isinstance(node, ast.BinOp | ast.AugAssign) and type(node.op) in ARITH_SWAPS:
        yield path, "arith", _set_op(ARITH_SWAPS[type(node.op)])
    elif isinstance(node, ast.BoolOp):
        yield path, "boolean", _set_op(ast.Or if isinstance(node.op, ast.And) else ast.And)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield path, "boolean", _drop_not
    elif isinstance(node, ast.Constant) and isinstance(node.value, bool):
        yield path, "boolean", _set_value(not node.value)
    elif isinstance(node, ast.Constant) and type(node.value) is int:
        yield path, "constant", _set_value(node.value + 1)
        yield path, "constant", _set_value(node.value - 1)
    if isinstance(node, ast.Return) and node.value is not None:
        if not (isinstance(node.value, ast.Constant) and node.value.value is None):
            yield path, "return", _return_none
    if isinstance(node, REMOVABLE) and not _is_docstring(node):
        yield path, "remove", _to_pass


def _set_compare(i: int, op: type[ast.cmpop]) -> Change:
    def apply(node: ast.AST) -> ast.AST:
        assert isinstance(node, ast.Compare)
        return ast.Compare(node.left, [*node.ops[:i], op(), *node.ops[i + 1 :]], node.comparators)

    return apply


def _set_op(op: type[ast.AST]) -> Change:
    def apply(node: ast.AST) -> ast.AST:
        node.op = op()  # type: ignore[attr-defined]
        return node

    return apply


def _set_value(value: object) -> Change:
    return lambda node: ast.Constant(value)


def _drop_not(node: ast.AST) -> ast.AST:
    # `not x` -> `bool(x)`: the truth of x, kept on its line.
    assert isinstance(node, ast.UnaryOp)
    return ast.Call(ast.Name("bool", ast.Load()), [node.operand], [])


def _return_none(node: ast.AST) -> ast.AST:
    return ast.Return(ast.Constant(None))


def _to_pass(node: ast.AST) -> ast.AST:
    return ast.Pass()


def _functions(tree: ast.Module, names: frozenset[str]) -> list[ast.FunctionDef]:
    return [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name in names
    ]


def _is_docstring(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _walk_with_paths(
    node: ast.AST, path: Path, whole: bool = False
) -> Iterator[tuple[ast.AST, Path]]:
    """Every node under `node` (itself first) with its path from `node`, in a fixed order.
    Unless `whole`, a function's or lambda's body and a docstring's constant are not entered
    (nested functions are mutated on their own, where named; docstrings never)."""
    yield node, path
    if not whole and (
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) or _is_docstring(node)
    ):
        return
    for name, value in ast.iter_fields(node):
        if isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, ast.AST):
                    yield from _walk_with_paths(item, path + ((name, i),), whole)
        elif isinstance(value, ast.AST):
            yield from _walk_with_paths(value, path + ((name, None),), whole)


def _path_to(tree: ast.AST, target: ast.AST) -> Path:
    for node, path in _walk_with_paths(tree, (), whole=True):
        if node is target:
            return path
    raise ValueError("node not in tree")


def _put(tree: ast.AST, path: Path, new: ast.AST) -> None:
    parent = _follow(tree, path[:-1])
    name, index = path[-1]
    if index is None:
        setattr(parent, name, new)
    else:
        getattr(parent, name)[index] = new


def _follow(tree: ast.AST, path: Path) -> ast.AST:
    node = tree
    for name, index in path:
        value = getattr(node, name)
        node = value[index] if index is not None else value
    return node
