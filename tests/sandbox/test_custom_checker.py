"""Custom checker programs (sandbox/grading/custom_checker.py), Python and C++: a problem with several
right answers ("print a divisor of n greater than 1"), where the expected answer is only one of
them. A checker's own failure is SANDBOX_ERROR; the program's wrong output is WRONG_ANSWER."""

from __future__ import annotations

import json

import pytest

from execrl.cli import main
from execrl.sandbox import Job, Limits, SandboxErrorCause, Verdict
from execrl.sandbox.grading import languages
from execrl.tasks.schema import Compare, StdioCase, StdioTests

CASES = (StdioCase("12\n", "2\n"), StdioCase("35\n", "5\n"))

PY_CHECKER = """
import sys
n = int(open(sys.argv[1]).read())
out = open(sys.argv[2]).read().split()
if len(out) != 1 or not out[0].isdigit():
    sys.exit(2)  # presentation error
d = int(out[0])
sys.exit(0 if 1 < d <= n and n % d == 0 else 1)
"""

CPP_CHECKER = r"""
#include <cstdio>
int main(int argc, char* argv[]) {
  long long n, d;
  FILE* in = fopen(argv[1], "r");
  FILE* out = fopen(argv[2], "r");
  if (!in || !out || fscanf(in, "%lld", &n) != 1) return 3;  // testlib's _fail
  if (fscanf(out, "%lld", &d) != 1) return 2;
  return (d > 1 && d <= n && n % d == 0) ? 0 : 1;
}
"""

PY_CRASHES = "raise RuntimeError('the checker is broken')\n"
CPP_CRASHES = "int main(int argc, char* argv[]) { int* p = 0; return *p; }\n"
# Reads the output as a number without checking: a program's junk crashes it.
PY_FRAGILE = """
import sys
n = int(open(sys.argv[1]).read())
d = int(open(sys.argv[2]).read())
sys.exit(0 if 1 < d <= n and n % d == 0 else 1)
"""

LARGEST = "n = int(input())\nprint(n)\n"  # right, and never the expected answer
ONE = "input()\nprint(1)\n"  # wrong
SMALLEST = "n = int(input())\nprint(next(d for d in range(2, n + 1) if n % d == 0))\n"


def job(program: str, source: str, language: str) -> Job:
    cmp = Compare(checker="program", checker_source=source, checker_language=language)
    return Job(program=program, tests=StdioTests(CASES, cmp), limits=Limits(wall_s=10))


@pytest.mark.parametrize(("source", "language"), [(PY_CHECKER, "python"), (CPP_CHECKER, "cpp")])
def test_a_checker_accepts_any_right_answer_and_rejects_a_wrong_one(sandbox, source, language):
    largest, one, smallest = sandbox.run_many(
        [job(LARGEST, source, language), job(ONE, source, language),
         job(SMALLEST, source, language)]
    )  # fmt: skip
    assert largest.verdict is Verdict.PASSED and largest.n_passed == 2
    assert one.verdict is Verdict.WRONG_ANSWER
    assert "checker rejected the output (exit status 1)" in one.message
    assert smallest.verdict is Verdict.PASSED


@pytest.mark.parametrize(("source", "language"), [(PY_CRASHES, "python"), (CPP_CRASHES, "cpp")])
def test_a_checkers_own_crash_is_a_sandbox_error(sandbox, source, language):
    (result,) = sandbox.run_many([job(LARGEST, source, language)])
    assert result.verdict is Verdict.SANDBOX_ERROR
    assert result.sandbox_error_cause == SandboxErrorCause.CHECKER_FAILED
    assert "the checker failed" in result.message


def test_a_program_cannot_escape_its_penalty_by_crashing_the_checker(sandbox):
    """The fragile checker crashes on junk; it accepts the expected answer, so the crash is the
    program's doing: WRONG_ANSWER (flagged), not a masked SANDBOX_ERROR."""
    (junk,) = sandbox.run_many([job("print('junk')\n", PY_FRAGILE, "python")])
    assert junk.verdict is Verdict.WRONG_ANSWER
    assert junk.possible_hack
    (right,) = sandbox.run_many([job(LARGEST, PY_FRAGILE, "python")])
    assert right.verdict is Verdict.PASSED


def test_the_programs_own_failure_keeps_its_verdict(sandbox):
    crash, plain = sandbox.run_many(
        [
            job("raise ValueError('x')\n", PY_CHECKER, "python"),
            Job(program=SMALLEST, tests=StdioTests(CASES), limits=Limits(wall_s=10)),
        ]
    )
    assert crash.verdict is Verdict.RUNTIME_ERROR
    assert plain.verdict is Verdict.PASSED  # jobs without a checker, in the same batch


def test_a_cpp_checker_from_a_task_file_through_eval_samples(tmp_path):
    task = {
        "schema": "execrl.task",
        "version": 1,
        "id": "divisor",
        "prompt": "Print a divisor of n greater than 1.",
        "metadata": {"$d": []},  # execrl.tasks.values tagging of an empty dict
        "tests": {
            "kind": "stdio",
            "cases": [{"stdin": c.stdin, "stdout": c.stdout} for c in CASES],
            "compare": {
                "checker": "program",
                "checker_source": CPP_CHECKER,
                "checker_language": "cpp",
            },
        },
    }
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(task) + "\n")
    samples = tmp_path / "samples.jsonl"
    samples.write_text(
        "".join(json.dumps({"task_id": "divisor", "solution": p}) + "\n" for p in (LARGEST, ONE))
    )
    out = tmp_path / "out.jsonl"
    args = ["eval-samples", str(samples), "--benchmark", f"jsonl:{tasks}", "--output", str(out)]
    assert main(args) == 0
    assert [json.loads(line)["verdict"] for line in out.read_text().splitlines()] == [
        "PASSED",
        "WRONG_ANSWER",
    ]


def test_a_compile_that_failed_for_its_jobs_limits_is_never_cached_for_another_job(sandbox):
    """The compile cache keyed on the compiler and the source: a compile that failed only for
    its job's own limits (a 1 MiB memory allowance) was cached as a compile error, so every
    later job with that source was SYNTAX_ERROR, and a checker's source sent as a program made
    every later right answer a masked SANDBOX_ERROR. Only definite results are cached, under
    the limits they were reached with, and a checker compiles under its own trusted limits."""
    from execrl.sandbox.grading.custom_checker import checker_program

    if languages.missing_tools("cpp"):
        pytest.skip("g++ not installed")
    cmp = Compare(
        checker="program", checker_source=CPP_CHECKER + "// poison\n", checker_language="cpp"
    )
    add = "#include <iostream>\nint main(){int a,b;std::cin>>a>>b;std::cout<<a+b;}\n// poison\n"
    starved = Limits(wall_s=10, memory_mb=1)
    stdio = StdioTests((StdioCase("3 4\n", "7"),))
    poison = [
        Job(add, stdio, language="cpp", limits=starved),
        Job(checker_program(cmp), stdio, language="cpp", limits=starved),
    ]
    for result in sandbox.run_many(poison):
        assert result.verdict is not Verdict.PASSED, result  # it did fail under 1 MiB
    ok, checked = sandbox.run_many(
        [
            Job(add, stdio, language="cpp", limits=Limits(wall_s=10)),
            Job(LARGEST, StdioTests(CASES, cmp), limits=Limits(wall_s=10)),
        ]
    )
    assert ok.passed, (ok.verdict, ok.message)
    assert checked.passed, (checked.verdict, checked.message)
