"""Wrong answers for `testgen` tasks, which `execrl tasks validate` checks score below the
task's reference suite: the hacks a model could find (docs/verifiers.md, "testgen").

Each keeps every call of the benchmark's own tests with its assertions disarmed (so it earns
the coverage term in full) and adds, except for `no_asserts`, a check that tells the reference
from a wrong version by something other than behaviour. Where the program's source or code
could be reached, that check passes on the reference and fails on every mutant, and the suite
would score the maximum; the verifier must leave it at 0.

- `no_asserts`: asserts nothing (each assertion becomes a guarded call): kills no mutant
  except one that runs past the time limit.
- `getsource`: compares `inspect.getsource` of the function (the wrapper's wrapped function
  too) with the reference's source.
- `code_fingerprint`: compares a hash of the function's bytecode, names and constants (nested
  code objects too) with the reference's, computed here by compiling the reference.
- `read_files`: looks for the reference's source in every file it can read (the run's
  directory, /tmp, the home directory, stdin and its own /proc entries).
- `namespace_scan`: looks for the reference's source in the strings of the function's globals
  and of every loaded module.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
from dataclasses import dataclass
from types import CodeType

WRONG_KINDS = ("no_asserts", "getsource", "code_fingerprint", "read_files", "namespace_scan")
PROGRAM_FILE = "<program under test>"  # the runner's file name for the program (testgen_runner)

UNWRAP = """
def _real(f):
    # The function the suite is handed may wrap the program's: look inside it.
    for cell in getattr(f, "__closure__", None) or ():
        value = cell.cell_contents
        if callable(value) and getattr(value, "__name__", None) == getattr(f, "__name__", ""):
            return value
    return f
"""


def _fingerprint(code: CodeType) -> str:
    """The bytecode, names and constants of a code object and those nested in it."""
    parts = [code.co_code.hex(), repr(code.co_names)]
    for const in code.co_consts:
        parts.append(_fingerprint(const) if isinstance(const, CodeType) else repr(const))
    return "|".join(parts)


# The hack's copy of it, the same function: the digest it checks is computed here with this one.
FINGERPRINT = (
    inspect.getsource(_fingerprint)
    .replace("code: CodeType", "code")
    .replace("CodeType", "type(code)")
)
CHECKS = {
    "getsource": """import inspect
{unwrap}
assert inspect.getsource(_real({entry})) == {source!r}
""",
    "code_fingerprint": """import hashlib
{unwrap}
{fingerprint}
_code = _real({entry}).__code__
assert hashlib.sha256(_fingerprint(_code).encode()).hexdigest() == {digest!r}
""",
    "read_files": """import os
def _texts():
    for path in ("/dev/stdin", "/proc/self/cmdline", "/proc/self/environ"):
        try:
            yield open(path, errors="ignore").read()
        except OSError:
            pass
    for root in (".", "/tmp", os.path.expanduser("~")):
        for folder, _, names in os.walk(root):
            for name in names:
                try:
                    yield open(os.path.join(folder, name), errors="ignore").read()
                except OSError:
                    pass
assert any({source!r} in text for text in _texts())
""",
    "namespace_scan": """import sys
{unwrap}
def _strings():
    spaces = [getattr(_real({entry}), "__globals__", {{}}), getattr({entry}, "__globals__", {{}})]
    spaces += [vars(m) for m in list(sys.modules.values()) if hasattr(m, "__dict__")]
    for space in spaces:
        for value in list(space.values()):
            if isinstance(value, str):
                yield value
assert any({source!r} in text for text in _strings())
""",
}


@dataclass(frozen=True, slots=True)
class SuiteParts:
    """What a wrong suite is made from."""

    entry: str
    program: str  # the reference, as the runner runs it (normalised)
    reference_suite: str


def wrong_suite(kind: str, parts: SuiteParts) -> str:
    """The wrong answer `kind` (one of WRONG_KINDS) for a task."""
    calls = disarmed(parts.reference_suite)
    if kind == "no_asserts":
        return calls
    check = CHECKS[kind].format(
        entry=parts.entry,
        source=function_source(parts.program, parts.entry),
        digest=code_digest(parts.program, parts.entry),
        unwrap=UNWRAP,
        fingerprint=FINGERPRINT,
    )
    return f"{check}\n{calls}"


class _Disarm(ast.NodeTransformer):
    def visit_Assert(self, node: ast.Assert) -> ast.AST:
        # `assert X` -> try: X / except Exception: pass: the call still runs, nothing is checked.
        handler = ast.ExceptHandler(ast.Name("Exception", ast.Load()), None, [ast.Pass()])
        return ast.copy_location(ast.Try([ast.Expr(node.test)], [handler], [], []), node)


def disarmed(suite: str) -> str:
    """`suite` with every assertion turned into a guarded evaluation of its expression."""
    tree = _Disarm().visit(ast.parse(suite))
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def function_source(program: str, entry: str) -> str:
    """The source of `entry`'s definition in `program`, as `inspect.getsource` would give it."""
    for node in ast.parse(program).body:
        if isinstance(node, ast.FunctionDef) and node.name == entry:
            lines = program.splitlines(keepends=True)
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            return "".join(lines[first - 1 : node.end_lineno])
    return ""


def code_digest(program: str, entry: str) -> str:
    """sha256 of `FINGERPRINT` of `entry`'s code object, compiled as the runner compiles it."""
    module = compile(program, PROGRAM_FILE, "exec")
    code = next((c for c in module.co_consts if getattr(c, "co_name", None) == entry), None)
    if code is None:
        return ""
    return hashlib.sha256(_fingerprint(code).encode()).hexdigest()
