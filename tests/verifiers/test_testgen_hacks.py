"""The `testgen` verifier in the sandbox: the benchmark's tests score the maximum, equivalent
mutants do not cap it, and each hack a suite could try scores below it. Each hack is also run
against a runner with its guard taken out, where it scores the maximum: the guard is what
stops it (the test can fail)."""

from __future__ import annotations

import pytest

from execrl.cli import main
from execrl.sandbox import Job, Limits
from execrl.sandbox.verifiers import testgen as verifier_module
from execrl.sandbox.verifiers import verification_of
from execrl.tasks.suites.mutants import normalise
from execrl.tasks.suites.testgen import Source, task_for
from execrl.tasks.suites.testgen_wrong import SuiteParts, wrong_suite

PROGRAM = '''def clamp(x, low, high):
    """x limited to [low, high]."""
    if x < low:
        return low
    if x > high:
        return high
    return x
'''
BENCHMARK_TESTS = """assert clamp(5, 0, 10) == 5
assert clamp(-1, 0, 10) == 0
assert clamp(11, 0, 10) == 10
assert clamp(0, 0, 10) == 0
assert clamp(10, 0, 10) == 10
"""
# Mutants of clamp: `<` -> `<=` and `>` -> `>=` (equivalent: at the boundary both return the
# same value), and each of the three returns -> None (all caught by the benchmark's tests).
SOURCE = Source(
    origin="hand/clamp",
    entry="clamp",
    description="Limit x to [low, high].",
    program=normalise(PROGRAM),
    functions=frozenset({"clamp"}),
    reference_suite=BENCHMARK_TESTS,
    known_wrong=(),
)
TASK = task_for(SOURCE, "no_asserts")
PARTS = SuiteParts(SOURCE.entry, SOURCE.program, SOURCE.reference_suite)

# Guards of the runner, and what a runner without each would do instead.
NO_CODE_GUARD = ("    deny_code(frozenset({id(namespace), id(globals())}))\n", "")
SOURCE_ON_DISK = (
    '    exec(compile(program, PROGRAM, "exec"), namespace)\n    del program\n',
    '    with open("program.py", "w") as f:\n        f.write(program)\n'
    '    exec(compile(program, "program.py", "exec"), namespace)\n    del program\n',
)
SOURCE_IN_NAMESPACE = (
    '    namespace = {"__name__": "program"}\n' + SOURCE_ON_DISK[0],
    '    namespace = {"__name__": "program", "__source__": program}\n' + SOURCE_ON_DISK[0],
)


def verify(sandbox, *suites):
    jobs = [Job(s, TASK.tests, limits=Limits(), id=TASK.id or "hand/clamp") for s in suites]
    return [verification_of(r) for r in sandbox.run_many(jobs)]


def without_guards(monkeypatch, *guards):
    source = verifier_module._runner_source().decode()
    for old, new in guards:
        assert source.count(old) == 1, old  # the guard is where this test says it is
        source = source.replace(old, new)
    monkeypatch.setattr(verifier_module, "_runner_source", lambda: source.encode())


def test_benchmark_tests_score_the_maximum_though_two_mutants_are_equivalent(sandbox):
    strong, weak = BENCHMARK_TESTS, "assert clamp(5, 0, 10) == 5\n"
    ref, partial = verify(sandbox, strong, weak)
    assert ref.score == 1.0 and ref.verdict.value == "PASSED", ref.feedback
    assert "rejects 3 of 3" in ref.feedback  # of 5 mutants: the 2 equivalent ones not counted
    # clamp(5, 0, 10) == 5 catches only `return x` -> None (1 of 3) and runs the two ifs and
    # the last return (lines 3, 5, 7) of the five lines the benchmark's calls run (3-7):
    # 0.8 * 1/3 + 0.2 * 3/5 = 0.3867
    assert partial.components["kill_rate"] == pytest.approx(1 / 3)
    assert partial.components["coverage"] == pytest.approx(3 / 5)
    assert partial.score == pytest.approx(0.8 / 3 + 0.2 * 0.6)


def test_suites_that_assert_nothing_score_at_most_the_coverage_weight(sandbox):
    empty, calls_only = verify(sandbox, "pass\n", wrong_suite("no_asserts", PARTS))
    assert empty.score == 0.0
    assert calls_only.components == {"passes_reference": 1.0, "kill_rate": 0.0, "coverage": 1.0}
    assert calls_only.score == pytest.approx(0.2)


def test_a_suite_that_rejects_the_reference_scores_zero(sandbox):
    (v,) = verify(sandbox, "assert clamp(5, 0, 10) == 6\n" + BENCHMARK_TESTS)
    assert v.score == 0.0 and "fails on the correct function" in v.feedback


@pytest.mark.parametrize(
    ("kind", "guards"),
    [
        ("code_fingerprint", [NO_CODE_GUARD]),
        ("getsource", [NO_CODE_GUARD, SOURCE_ON_DISK]),
        ("read_files", [SOURCE_ON_DISK]),
        ("namespace_scan", [SOURCE_IN_NAMESPACE]),
    ],
)
def test_a_suite_that_tells_the_reference_by_its_code_or_source_scores_zero(
    kind, guards, sandbox, monkeypatch
):
    hack = wrong_suite(kind, PARTS)
    (guarded,) = verify(sandbox, hack)
    assert guarded.score == 0.0, guarded.feedback
    assert guarded.components["passes_reference"] == 0.0
    without_guards(monkeypatch, *guards)
    (unguarded,) = verify(sandbox, hack)
    assert unguarded.score == 1.0, unguarded.feedback  # what the guard takes away


def test_a_suite_cannot_forge_the_result_line_or_reach_the_coverage(sandbox):
    # Prints a line with the runner's mark, calls clamp on nothing, and tries the channels a
    # result could be forged on: the child's stdout is /dev/null, the key never in reach.
    forger = (
        "import sys, os\n"
        "print('@execrl-testgen 0' * 3)\n"
        "os.write(1, b'\\n@execrl-testgen forged\\n')\n"
        "sys.__stdout__.write('@execrl-testgen x\\n')\n"
    )
    (v,) = verify(sandbox, forger)
    assert v.components == {"passes_reference": 1.0, "kill_rate": 0.0, "coverage": 0.0}, v.feedback


def test_tasks_validate_passes_on_the_testgen_suite(data_env, capsys):
    name = "testgen:split=test,n=1,difficulty=1"
    assert main(["tasks", "validate", name]) == 0
    assert f"{name}: 1/1 reference solutions pass; 0 known defect(s), 0 new failure(s)" in (
        capsys.readouterr().out
    )


def test_test_functions_and_testcase_classes_run_as_tests(sandbox):
    functions = "def test_top():\n    assert clamp(11, 0, 10) == 10\n"
    cases = (
        "import unittest\n\n\nclass T(unittest.TestCase):\n"
        "    def test_low(self):\n        self.assertEqual(clamp(-1, 0, 10), 0)\n"
    )
    by_function, by_case = verify(sandbox, functions, cases)
    # each catches the mutant whose return it reaches: 1 of 3 (by hand: `return high` -> None,
    # `return low` -> None)
    assert by_function.components["kill_rate"] == pytest.approx(1 / 3), by_function.feedback
    assert by_case.components["kill_rate"] == pytest.approx(1 / 3), by_case.feedback
