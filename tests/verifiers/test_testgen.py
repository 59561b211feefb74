"""The `testgen` suite's parts that need no sandbox: the mutation operators, the score, the
wrong answers, and the tasks built from the benchmarks' data."""

from __future__ import annotations

import ast

import pytest

from execrl.sandbox.verifiers.testgen import Calibration, SuiteRun, score
from execrl.tasks.suites.mutants import mutants, normalise, pick, statement_count
from execrl.tasks.suites.testgen_wrong import WRONG_KINDS, SuiteParts, disarmed, wrong_suite

SMALL = """def f(a, b):
    c = a + b
    if c >= 10 and a:
        return True
    return c % 3
"""


def changed_line(mutant_source: str, reference: str) -> str:
    (line,) = [
        m.strip()
        for m, r in zip(mutant_source.splitlines(), reference.splitlines(), strict=True)
        if m != r
    ]
    return line


def test_each_operator_makes_the_mutants_worked_out_by_hand():
    # By hand, site by site in source order:
    #   line 2 `c = a + b`: remove -> pass; arith + -> -
    #   line 3 `c >= 10 and a`: boolean and -> or; compare >= -> >; constant 10 -> 11, 9
    #   line 4 `return True`: return -> None; boolean True -> False
    #   line 5 `return c % 3`: return -> None; arith % -> //; constant 3 -> 4, 2
    reference = normalise(SMALL)
    found = {
        (m.operator, m.line, changed_line(m.source, reference))
        for m in mutants(SMALL, frozenset({"f"}))
    }
    assert found == {
        ("remove", 2, "pass"),
        ("arith", 2, "c = a - b"),
        ("boolean", 3, "if c >= 10 or a:"),
        ("compare", 3, "if c > 10 and a:"),
        ("constant", 3, "if c >= 11 and a:"),
        ("constant", 3, "if c >= 9 and a:"),
        ("return", 4, "return None"),
        ("boolean", 4, "return False"),
        ("return", 5, "return None"),
        ("arith", 5, "return c // 3"),
        ("constant", 5, "return c % 4"),
        ("constant", 5, "return c % 2"),
    }
    assert statement_count(SMALL, frozenset({"f"})) == 4  # assign, if, return, return


def test_mutants_leave_docstrings_defaults_module_code_and_other_functions_alone():
    program = '''LIMIT = 3


def helper(x=1):
    """Doc 5."""
    return x


def g(y):
    """Doc 7."""
    return helper(y)
'''
    found = mutants(program, frozenset({"g"}))
    # Only `return helper(y)` in g can change (return -> None): no constant in the docstrings,
    # the default `x=1`, LIMIT, or the helper's body is touched.
    assert [(m.operator, changed_line(m.source, normalise(program))) for m in found] == [
        ("return", "return None")
    ]
    for m in found:  # the layout is the reference's: a traceback's line numbers tell nothing
        assert m.source.count("\n") == normalise(program).count("\n")
        assert ast.dump(ast.parse(m.source).body[0]) == ast.dump(ast.parse(program).body[0])


def test_pick_is_deterministic_and_spreads_over_the_operators():
    found = mutants(SMALL, frozenset({"f"}))
    chosen = pick(found, 6, "task-1")
    assert chosen == pick(found, 6, "task-1")
    # six operators, six picks: one of each, whichever the seed draws within an operator
    assert sorted(m.operator for m in chosen) == sorted(
        ["remove", "arith", "boolean", "compare", "constant", "return"]
    )
    assert len(pick(found, 100, "task-1")) == len(found)


def runs(reference_covered, mutant_passed, reference_passed=True):
    first = SuiteRun(
        reference_passed, frozenset(reference_covered), "" if reference_passed else "x"
    )
    return [first, *(SuiteRun(p, frozenset(), "") for p in mutant_passed)]


LABELS = ["the reference", *(f"a mutant ({op})" for op in "abcde")]


def test_score_is_kill_rate_and_coverage_weighted_as_documented():
    # Programs 1-4 are rejected by the benchmark's tests (5 is equivalent: not counted); its
    # calls cover lines {2, 3, 4, 5, 6}. The suite rejects 1 and 2, lets 3 and 4 through,
    # covers 2, 3, 4 (and line 9, which the benchmark's tests never reach: not counted).
    # kill = 2/4 = 0.5, coverage = 3/5 = 0.6, score = 0.8 * 0.5 + 0.2 * 0.6 = 0.52.
    calibration = Calibration((1, 2, 3, 4), frozenset({2, 3, 4, 5, 6}))
    v = score(runs({2, 3, 4, 9}, [False, False, True, True, True]), calibration, LABELS)
    assert v.components == {"passes_reference": 1.0, "kill_rate": 0.5, "coverage": 0.6}
    assert v.score == pytest.approx(0.52) and v.verdict.value == "WRONG_ANSWER"
    assert "rejects 2 of 4" in v.feedback and "a mutant (c), a mutant (d)" in v.feedback


def test_a_suite_that_fails_on_the_reference_scores_zero_whatever_it_kills():
    calibration = Calibration((1, 2), frozenset({1, 2}))
    v = score(runs({1, 2}, [False, False], reference_passed=False), calibration, LABELS)
    assert v.score == 0.0 and v.components["passes_reference"] == 0.0


def test_the_benchmark_tests_own_runs_score_the_maximum():
    # Killing exactly what the benchmark's tests kill, covering exactly their lines: 1.0.
    calibration = Calibration((1, 3), frozenset({4, 5}))
    v = score(runs({4, 5}, [False, True, False]), calibration, LABELS)
    assert v.score == 1.0 and v.verdict.value == "PASSED"


def test_coverage_stands_in_for_kill_rate_where_the_benchmark_covers_no_line():
    # No recorded call could be replayed (arguments not plain data): the coverage term
    # follows the kill rate, so the weights still sum to the kill rate.
    v = score(runs(set(), [False, True]), Calibration((1, 2), frozenset()), LABELS)
    assert v.score == pytest.approx(0.5) and v.components["coverage"] == 0.5


def test_disarmed_suites_call_everything_and_check_nothing():
    suite = "def check(f):\n    assert f(1) == 2, 'msg'\ncheck(g)\nassert g(2) == 3\n"
    assert disarmed(suite) == (
        "def check(f):\n    try:\n        f(1) == 2\n    except Exception:\n        pass\n"
        "check(g)\ntry:\n    g(2) == 3\nexcept Exception:\n    pass\n"
    )


def test_every_wrong_kind_is_a_suite_that_parses_and_keeps_the_benchmark_calls():
    parts = SuiteParts("f", normalise(SMALL), "assert f(11, 1) == True\n")
    for kind in WRONG_KINDS:
        suite = wrong_suite(kind, parts)
        ast.parse(suite)
        assert "f(11, 1) == True" in suite and "assert f(11" not in suite, kind


def test_the_suite_builds_tasks_from_mbpp_and_humaneval(data_env):
    from execrl.tasks.catalog.registry import load_benchmark

    tasks = load_benchmark("testgen:split=test,n=3")
    origins = {t.metadata["benchmark_task"].split("/")[0] for t in tasks}
    assert origins == {"Mbpp", "HumanEval"}
    for task in tasks:
        spec = task.tests.spec
        assert task.reference == spec["reference_suite"] and task.tests.wrong
        assert 1 <= len(spec["mutants"]) <= 10 and f"`{spec['entry_point']}`" in task.prompt
        # HumanEval tasks carry HumanEvalFix's buggy solution as a known-wrong program
        humaneval = task.metadata["benchmark_task"].startswith("HumanEval/")
        assert bool(spec["known_wrong"]) == humaneval
        # the benchmark's tests are the reference answer, not shown in the prompt
        assert spec["reference_suite"].strip().splitlines()[-1] not in task.prompt


def test_the_suite_reads_the_data_dir_it_is_given(data_dir, monkeypatch, capsys):
    """`--data-dir` reaches the suite as it reaches the benchmarks: no EXECRL_DATA_DIR, no
    ../shared/data where the package looks, the flag alone (it once read the variable only)."""
    from execrl.cli import main
    from execrl.tasks import sources

    monkeypatch.delenv("EXECRL_DATA_DIR", raising=False)
    monkeypatch.setattr(sources, "cache_dir", lambda: data_dir / "no-such-cache")
    monkeypatch.setattr(sources, "hub_unreachable", lambda: "offline in this test")
    assert main(["tasks", "show", "testgen/test/1/0", "--data-dir", str(data_dir)]) == 0
    assert "the 'testgen' verifier" in capsys.readouterr().out
    assert main(["tasks", "show", "testgen/test/1/1"]) == 2  # without it, the data is not found
    assert "EXECRL_DATA_DIR" in capsys.readouterr().err


def test_recorded_arguments_are_plain_data_copied_exactly():
    from execrl.sandbox.verifiers.testgen_runner import NotPlain, decode, encode

    value = [1, 2.5, float("inf"), "s", b"\x00", None, True, (1, [2]), {3, 4}, frozenset({5})]
    value.append({"k": {(1, 2): [10**40]}})
    assert decode(encode(value, [1000])) == value
    assert type(decode(encode((1,), [10]))) is tuple  # not turned into a list

    class Sneaky(list):  # a subclass could run the suite's code while being copied
        pass

    for bad in (Sneaky([1]), [object()], lambda: 0):
        with pytest.raises(NotPlain):
            encode(bad, [1000])
    with pytest.raises(NotPlain):  # over the budget of values
        encode(list(range(100)), [10])


def test_functions_that_run_their_input_as_code_are_left_out(data_env):
    # HumanEval/160 evals an expression built from its arguments: the coverage replay would
    # run the suite's code in the runner's trusted process.
    from execrl.tasks.suites import testgen

    origins = {s.origin for level in testgen._pool(data_env).values() for s in level}
    assert "HumanEval/160" not in origins and "HumanEval/159" in origins
