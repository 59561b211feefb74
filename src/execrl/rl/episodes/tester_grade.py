"""The tester of `coder_tester` (`coder_tester.py`): its test suite as the coder's checks, and
its grade against the group's wrong programs through the `testgen` verifier.

The tester's suite is graded as the `testgen` suite grades one (docs/verifiers.md; the one home
of the kill and coverage scoring, `sandbox/verifiers/testgen.py`): it must pass on the task's
reference, else it scores 0 (a suite that rejects everything tests nothing); then it earns
0.8 x the fraction of the wrong programs it rejects, among those the task's hidden tests reject
(the verifier's calibration runs them as a suite), + 0.2 x the reference's line coverage under
its calls, relative to the hidden tests'. The wrong programs are the group's coder answers that
the hidden tests reject (every attempt, each program once; an answer without code or that does
not compile is left out: any suite rejects it). A group whose coders wrote none is graded on
the reference's mutants instead (`tasks/suites/mutants.py`, as the testgen suite picks them),
so that a tester is still scored when every coder passed.

The coder reads which of the suite's tests fail on its code: the suite's top-level statements,
each run as one assert-style test against the coder's program (a `test*` function is called
after its definition). They run in the sandbox like any test; what they say reaches the coder
only as feedback, never a reward.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from execrl.rewards.scoring.scorer import ScoredSample, build_sample
from execrl.sandbox import ExecutionResult, Job, Verdict, verification_of
from execrl.tasks.prompt_helpers import with_prompt_helpers
from execrl.tasks.schema import AssertTests, CallTests, Compare, Task, VerifierTests
from execrl.tasks.suites.mutants import mutants, normalise, pick
from execrl.tasks.suites.testgen import MAX_MUTANTS

SHOWN_FAILURES = 5  # failing tests listed in the coder's feedback
SHOWN_CHARS = 300  # each shown test or error cut to this many characters
# a suite that tests nothing (no code in the answer), as testgen scores one
NOTHING_TESTED = {"passes_reference": 0.0, "kill_rate": 0.0, "coverage": 0.0}


@dataclass(frozen=True, slots=True)
class TesterGrade:
    """What the tester's suite earned in its group."""

    reward: float  # the testgen verifier's score (0 unless it passes on the reference)
    # testgen's components (passes_reference, kill_rate, coverage); {} when nothing ran
    components: dict[str, float]
    masked: bool  # a sandbox failure: the grade means nothing
    note: str  # for people: what the suite was graded against, or why it was not
    result: ExecutionResult | None = None  # the verifier's run (None: nothing ran)


def hidden_suite(task: Task) -> str:
    """The task's hidden tests as a test suite that calls the function by name, for the testgen
    verifier's calibration. ValueError (naming the task) for tests it cannot write as one."""
    entry, tests = task.entry_point, task.tests
    if isinstance(tests, AssertTests):
        setup = with_prompt_helpers(task.prompt, tests.setup, entry, tests.statements)
        return f"candidate = {entry}\n{setup}\n" + "\n".join(tests.statements) + "\n"
    if isinstance(tests, CallTests) and tests.compare == Compare():
        pairs = list(zip(tests.inputs, tests.expected, strict=True))
        if all(_reads_back(args) and _reads_back(expected) for args, expected in pairs):
            return "".join(f"assert {entry}(*{a!r}) == {e!r}\n" for a, e in pairs)
    raise ValueError(
        f"task {task.id}: coder_tester grades the tester against the hidden tests run as a "
        f"suite, which it writes for asserts and for exact-equality calls with literal values, "
        f"not {type(tests).__name__} with compare={getattr(tests, 'compare', None)}; use a "
        "benchmark of Python functions (humaneval, mbpp, synthetic)"
    )


def check_task(task: Task) -> None:
    """ValueError naming the task when the tester cannot be graded on it."""
    if task.language != "python" or not task.entry_point or not task.reference:
        raise ValueError(
            f"task {task.id}: coder_tester needs a Python task with an entry point and a "
            "reference solution (the tester's suite must pass on it); use humaneval, mbpp or "
            "synthetic tasks"
        )
    hidden_suite(task)


def suite_of(task: Task, answer: str) -> str | None:
    """The tester's suite: the code block of its answer (None: no code)."""
    return build_sample(_suite_task(task, {}), answer, "extract").program


def checks_of(suite: str | None) -> AssertTests | None:
    """The suite's top-level statements as assert-style tests, in order, each `test*` function
    called after its definition; None when there is nothing to run (no suite, no parse)."""
    try:
        tree = ast.parse(suite or "")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    statements = []
    for node in tree.body:
        statements.append(ast.get_source_segment(suite or "", node) or ast.unparse(node))
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
            statements.append(f"{node.name}()")
    return AssertTests(statements=tuple(statements)) if statements else None


def failing_tests_text(checks: AssertTests, result: ExecutionResult) -> str:
    """The coder's feedback: which of the tester's tests fail on its code, and how."""
    failed = [t for t in result.tests if t.verdict is not Verdict.PASSED]
    if not result.tests:  # the program did not load, or nothing ran
        return f"Your code failed before any test ran: {result.verdict}: {_cut(result.message)}"
    lines = [f"{len(failed)} of the {len(result.tests)} tests written before your code fail on it:"]
    for t in failed[:SHOWN_FAILURES]:
        shown = checks.statements[t.index] if 0 <= t.index < len(checks.statements) else "?"
        error = ": ".join(part for part in (t.exception, t.message) if part)
        lines.append(f"- {_cut(shown)}\n  {t.verdict}: {_cut(error)}")
    return "\n".join(lines)


def wrong_programs(answers: Sequence[ScoredSample]) -> list[str]:
    """The programs among the group's graded coder answers (`ScoredSample`) that the hidden
    tests reject, each once; answers without code, that do not compile or whose grade was a
    sandbox failure are left out."""
    out: list[str] = []
    for graded in answers:
        program, result = graded.sample.program, graded.sample.result
        if program is None or result is None or result.passed or graded.reward.masked:
            continue
        if result.verdict in (Verdict.SYNTAX_ERROR, Verdict.SANDBOX_ERROR):
            continue
        if program not in out:
            out.append(program)
    return out


def grade_suites(task: Task, suites: Sequence[str | None], wrong: Sequence[str],
                 sandbox: Any, limits: Any) -> list[TesterGrade]:  # fmt: skip
    """Each tester's suite graded by the testgen verifier against the group's `wrong` programs
    (the reference's mutants when there are none). The first suite runs alone: the verifier
    calibrates a task's programs once, with the first request that names them."""
    spec, against = _spec(task, wrong)
    if spec is None:
        return [TesterGrade(0.0, {}, False, against) for _ in suites]
    graded = _suite_task(task, spec)
    jobs = [Job.for_task(graded, s, limits) for s in suites if s is not None]
    results = sandbox.run_many(jobs[:1]) + sandbox.run_many(jobs[1:]) if jobs else []
    found = iter(results)
    return [
        TesterGrade(0.0, dict(NOTHING_TESTED), False, "no tests in the answer") if s is None
        else _grade(next(found), against)
        for s in suites
    ]  # fmt: skip


def _grade(result: ExecutionResult, against: str) -> TesterGrade:
    verification = verification_of(result)
    if result.verdict is Verdict.SANDBOX_ERROR or verification is None:
        if result.sandbox_error_cause == "task_data":  # the hidden tests reject none of them
            note = "the hidden tests, run as a suite, reject none of the wrong programs"
            return TesterGrade(0.0, {}, False, note, result)
        return TesterGrade(0.0, {}, True, f"sandbox error: {result.message}", result)
    return TesterGrade(verification.score, dict(verification.components), False,
                       f"against {against}: {verification.feedback}", result)  # fmt: skip


def _spec(task: Task, wrong: Sequence[str]) -> tuple[dict[str, Any] | None, str]:
    """The testgen spec of the task against `wrong` (or the reference's mutants), and what it
    is graded against; None when there is nothing to reject."""
    reference = normalise(task.reference or "")
    spec: dict[str, Any] = {
        "entry_point": task.entry_point,
        "reference_program": reference,
        "mutants": [],
        "mutant_operators": [],
        "known_wrong": list(wrong),
        "reference_suite": hidden_suite(task),
    }
    if wrong:
        return spec, f"the group's {len(wrong)} wrong coder programs"
    tree = ast.parse(reference)
    functions = frozenset(n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef))
    chosen = pick(mutants(reference, functions), MAX_MUTANTS, task.id)
    if not chosen:
        return None, "nothing to reject: no wrong coder program and no mutant of the reference"
    spec["mutants"] = [m.source for m in chosen]
    spec["mutant_operators"] = [m.operator for m in chosen]
    return spec, f"{len(chosen)} mutants of the reference (every coder passed)"


def _suite_task(task: Task, spec: dict[str, Any]) -> Task:
    """The task of grading a suite for `task` (the testgen verifier's)."""
    return Task(id=f"{task.id}/tester", prompt=task.prompt, tests=VerifierTests("testgen", spec),
                entry_point=task.entry_point)  # fmt: skip


def _reads_back(value: Any) -> bool:
    """Whether a value written as its repr reads back equal (plain data; not NaN)."""
    try:
        return bool(ast.literal_eval(repr(value)) == value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + " ..."
