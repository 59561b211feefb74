"""KodCode (`KodCode/KodCode-V1`): a question, a `solution` and a pytest file `test` (called
`test_code` in some derived sets; either is read) that imports from the module `solution`.

Each record: `question_id`, `question`, `solution`, `test`, `test_info` (the functions the tests
call: `function_name`, `function_declaration`, ...), `gpt_difficulty`, `subset`, `style`.

KodCode runs `pytest` on the test file with the candidate saved as `solution.py`. Here the test
file becomes assert-style tests: its `from solution import ...` lines are dropped (the tests see
the program's names, each function wrapped as the candidate), `import solution` binds a
namespace of the program's names, and each test is one statement: every top-level `test_*`
function, and every `test_*` method of a `Test*` class on a fresh instance. pytest is not
importable in the sandbox, so `import pytest` binds the part of it the tests use, written here
(`_PRELUDE`): `mark.parametrize` (the test runs once per parameter set, all inside one
statement), `param`, `raises` (with `match`), `approx` (pytest's default tolerances), and
`fixture` (a test's other arguments come from the file's fixtures; a `yield` fixture gives its
first value and is not finalised). Departures: pytest's own fixtures (`tmp_path`, `capsys`,
`monkeypatch`) are not provided, so a test taking one fails naming it, nor are fixtures
defined inside a test class (they are called without an instance); other marks (`skip`,
`xfail`) have no effect; assertion rewriting is absent (a failing assert says less); the
program's functions must return plain data (execrl's guard; a returned object of the program's
own class fails the test, where pytest would let the test inspect it).
The reference is `solution`.
"""

from __future__ import annotations

import ast
from typing import Any

from execrl.tasks.contest_source import HubSource, Record, read_selected
from execrl.tasks.errors import TaskDataError
from execrl.tasks.schema import AssertTests, Task
from execrl.tasks.sources import field, make_task

HUB = HubSource("KodCode/KodCode-V1", "train")
OPTIONS = ("subset",)

# Trusted test code put before the test file: the part of pytest KodCode's tests use (pytest
# itself is not importable in the sandbox), and the runner each statement calls. `_kodcode_run`
# runs a test once per parametrize set, taking other parameters from the file's fixtures.
_PRELUDE = """
import re as _kodcode_re

_kodcode_marks = {}
_kodcode_fixtures = {}


class _KodcodeMark:
    def parametrize(self, names, values, **kwargs):
        def mark(fn):
            _kodcode_marks.setdefault(fn, []).append((names, list(values)))
            return fn
        return mark

    def __getattr__(self, name):  # skip, xfail, timeout...: no effect here
        def mark(*args, **kwargs):
            if len(args) == 1 and callable(args[0]) and not kwargs:
                return args[0]
            return lambda fn: fn
        return mark


class _KodcodeParam:
    def __init__(self, *values, **kwargs):
        self.values = values


class _KodcodeRaises:
    def __init__(self, expected, match=None):
        self.expected, self.match, self.value, self.type = expected, match, None, None

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            raise AssertionError(f"DID NOT RAISE {self.expected}")
        if not issubclass(exc_type, self.expected):
            return False
        if self.match is not None and not _kodcode_re.search(self.match, str(exc)):
            raise AssertionError(f"{str(exc)!r} does not match {self.match!r}")
        self.value, self.type = exc, exc_type
        return True


class _KodcodeApprox:
    def __init__(self, expected, rel=None, abs=None):
        self.expected, self.rel, self.abs = expected, rel, abs

    def _close(self, got, want):
        if isinstance(want, (list, tuple)):
            return (isinstance(got, (list, tuple)) and len(got) == len(want)
                    and all(self._close(g, w) for g, w in zip(got, want)))
        if isinstance(want, dict):
            return (isinstance(got, dict) and got.keys() == want.keys()
                    and all(self._close(got[k], want[k]) for k in want))
        if isinstance(want, bool) or not isinstance(want, (int, float)):
            return got == want
        if not isinstance(got, (int, float)) or isinstance(got, bool):
            return False
        if got == want:
            return True
        rel = 1e-6 if self.rel is None and self.abs is None else (self.rel or 0.0)
        tol = max(rel * abs(want), 1e-12 if self.abs is None else self.abs)
        return abs(got - want) <= tol

    def __eq__(self, other):
        return self._close(other, self.expected)

    def __repr__(self):
        return f"approx({self.expected!r})"


class _KodcodePytest:
    mark = _KodcodeMark()
    param = _KodcodeParam
    raises = _KodcodeRaises
    approx = _KodcodeApprox

    @staticmethod
    def fixture(fn=None, **kwargs):
        def register(f):
            _kodcode_fixtures[f.__name__] = f
            return f
        return register(fn) if fn is not None else register


pytest = _KodcodePytest()


def _kodcode_value(name, params, made):
    if name in made:
        return made[name]
    if name not in _kodcode_fixtures:
        raise TypeError(f"pytest fixture {name!r} is not provided by execrl")
    fixture = _kodcode_fixtures[name]
    kwargs = {p: _kodcode_value(p, params, made) for p in params.get(name, ())}
    value = fixture(**kwargs)
    if hasattr(value, "__next__"):  # a yield fixture: its value is the first item
        value = next(value)
    made[name] = value
    return value


def _kodcode_run(test, names, fixture_params, self=None):
    sets = [{}]
    for argnames, values in reversed(_kodcode_marks.get(test, [])):
        if isinstance(argnames, str):
            argnames = [n.strip() for n in argnames.split(",") if n.strip()]
        rows = []
        for value in values:
            if isinstance(value, _KodcodeParam):
                value = value.values
            elif len(argnames) == 1:
                value = (value,)
            rows.append(dict(zip(argnames, value)))
        sets = [dict(s, **r) for s in sets for r in rows]
    for kwargs in sets:
        made = dict(kwargs)
        call = {n: _kodcode_value(n, fixture_params, made) for n in names}
        if self is None:
            test(**call)
        else:
            test(self, **call)
"""


def read_kodcode(records: list[Record], options: dict[str, str]) -> list[Task]:
    return read_selected(
        "kodcode", records, ("subset", options.get("subset")), "question_id", _task
    )


def _task(where: str, rec: dict[str, Any]) -> Task:
    qid = field(where, rec, "question_id")
    test_field = "test" if "test" in rec or "test_code" not in rec else "test_code"
    tests = pytest_as_asserts(where, field(where, rec, test_field))
    info = rec.get("test_info") or []
    names = [i.get("function_name") for i in info if isinstance(i, dict)]
    declarations = [i.get("function_declaration") for i in info if isinstance(i, dict)]
    entry = names[0] if len(names) == 1 and isinstance(names[0], str) else None
    prompt = field(where, rec, "question").rstrip() + "\n"
    if any(declarations):
        prompt += "\nWrite the Python code, defining:\n" + "\n".join(
            f"    {d.strip()}" for d in declarations if d
        )
        prompt += "\n"
    return make_task(
        where,
        id=qid,
        prompt=prompt,
        tests=tests,
        entry_point=entry,
        reference=field(where, rec, "solution"),
        metadata={
            "source": "kodcode",
            "subset": rec.get("subset"),
            "style": rec.get("style"),
            "difficulty": rec.get("gpt_difficulty"),
        },
    )


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[str, ...]:
    args = fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
    return tuple(a.arg for a in args if a.arg != "self")


def _is_fixture(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for d in fn.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if isinstance(target, (ast.Attribute, ast.Name)) and (
            getattr(target, "attr", None) == "fixture" or getattr(target, "id", None) == "fixture"
        ):
            return True
    return False


def _is_test(node: ast.stmt) -> bool:
    return isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith(
        "test"
    )


def _rewrite_import(node: ast.stmt) -> str | None:
    """What an import of `solution` or `pytest` becomes (None: keep the line as it is)."""
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "solution":
        return ""  # the tests see the program's names already
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "pytest":
        return "\n".join(f"{a.asname or a.name} = pytest.{a.name}" for a in node.names)
    if isinstance(node, ast.Import):
        names = {a.name for a in node.names}
        if names <= {"solution", "pytest"}:
            if "solution" not in names:
                return ""
            return (
                "import types as _kodcode_types\nsolution = _kodcode_types.SimpleNamespace(**{k: "
                "v for k, v in dict(globals()).items() if not k.startswith('_')})"
            )
    return None


def pytest_as_asserts(where: str, source: str) -> AssertTests:
    """A pytest file as assert tests: setup is the prelude and the file with its imports of
    `solution` and `pytest` rewritten, and one statement per test (module docstring)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise TaskDataError(f"{where}: the test file does not parse: line {exc.lineno}") from None
    lines = source.splitlines()
    replaced: dict[int, str] = {}  # first line (0-based) -> replacement
    dropped: set[int] = set()
    fixtures: dict[str, tuple[str, ...]] = {}
    tests: list[tuple[str, tuple[str, ...], str | None]] = []  # (callable, params, class)
    for node in tree.body:
        rewritten = _rewrite_import(node)
        if rewritten is not None:
            span = range(node.lineno - 1, node.end_lineno or node.lineno)
            dropped.update(span)
            replaced[span[0]] = rewritten
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _is_fixture(node):
            fixtures[node.name] = _params(node)
        elif _is_test(node):
            assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            tests.append((node.name, _params(node), None))
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            for m in node.body:
                if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and _is_fixture(m):
                    fixtures[m.name] = _params(m)
                elif _is_test(m):
                    assert isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
                    tests.append((f"{node.name}.{m.name}", _params(m), node.name))
    if not tests:
        raise TaskDataError(f"{where}: the test file defines no test_* function; nothing to grade")
    kept = [
        replaced.get(i, "") if i in dropped else line
        for i, line in enumerate(lines)
        if i not in dropped or i in replaced
    ]
    setup = f"{_PRELUDE}\n_kodcode_fixture_params = {fixtures!r}\n\n" + "\n".join(kept)
    statements = tuple(
        f"_kodcode_run({fn}, {params!r}, _kodcode_fixture_params"
        + (f", self={cls}())" if cls else ")")
        for fn, params, cls in tests
    )
    return AssertTests(setup=setup, statements=statements)
