"""The tests a self-correcting model may see, and the feedback turn built from them.

Which tests are visible, by benchmark family (the protocol `self_correct` records):

- a separate visible split (`Task.visible_tests` differs from `Task.tests`): stdin/stdout tasks'
  public tests (codejam, CodeContests), the synthetic suite's visible calls: "public tests";
- MBPP style (the visible tests are the graded tests, all listed in the prompt): the first
  listed test only, as Reflexion and LDB do: "first listed test";
- HumanEval style (no visible tests; a code prompt): the `>>> call` / result examples of the
  prompt's docstring: "prompt examples";
- anything else: the first `visible_split` hidden tests (0: none, one attempt only): "configured
  split".

Hidden tests never enter feedback: the feedback is built from a `VisibleTests` alone, which holds
only the tests above and is run apart from the hidden ones.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, replace
from typing import Any

from execrl.sandbox import ExecutionResult, Job, TestOutcome, Verdict, describe_value
from execrl.tasks.schema import AssertTests, CallTests, StdioTests, Task, Tests

SHOWN_CHARS = 500  # each value shown in feedback is cut to this many characters


@dataclass(frozen=True, slots=True)
class VisibleTests:
    """The tests feedback may use, and how each is shown to the model."""

    tests: Tests
    shown: tuple[str, ...]  # test i as the model sees it: a call, a stdin, an assert line
    expected: tuple[str, ...]  # its expected value or output, as shown
    source: str  # "public tests", "first listed test", "prompt examples", "configured split"


def visible_tests(task: Task, visible_split: int = 0) -> VisibleTests | None:
    """The task's visible tests under the protocol above; None when it has none."""
    vis = task.visible_tests
    if vis is not None and vis != task.tests and len(vis) > 0:
        return _described(task, vis, "public tests")
    if isinstance(vis, AssertTests) and vis == task.tests:
        first = vis.statements[0]
        call = _assert_as_call(first, task.entry_point)
        return _described(task, call or replace(vis, statements=(first,)), "first listed test")
    if vis is None and task.entry_point:
        examples = prompt_examples(task.prompt, task.entry_point)
        if examples is not None:
            return _described(task, examples, "prompt examples")
    if visible_split > 0:
        return _described(task, _head(task.tests, visible_split), "configured split")
    return None


# How HumanEval's docstrings write an example inline: `f(1) == 2`, `f(1) => 2`, `f(1) ➞ 2`, ...
INLINE_ARROWS = ("==", "=>", "➞", "->", "→", " should return ", " returns ", " return ", "=")


def checked_against_reference(
    task: Task, visible: VisibleTests, sandbox: Any
) -> VisibleTests | None:
    """Prompt examples without the ones the task's reference solution fails: a docstring can be
    wrong (HumanEval/47's median example) or describe a recurrence rather than a call
    (HumanEval/130's `tri(1) = 3`), and feedback from it would teach the wrong answer. Other
    sources are the benchmark's own tests and are kept as they are. None: no example is right."""
    if visible.source != "prompt examples" or not task.reference:
        return visible
    assert isinstance(visible.tests, CallTests)
    key = (task.id, task.prompt, task.reference)
    if key not in _REFERENCE_PASSES:
        job = Job(task.reference, visible.tests, task.entry_point, id=f"{task.id}/examples")
        result = sandbox.run(job)
        if result.verdict is Verdict.SANDBOX_ERROR:
            return visible  # not known to be wrong; not cached, so the next episode asks again
        _REFERENCE_PASSES[key] = tuple(t.index for t in result.tests if t.verdict is Verdict.PASSED)
    keep = _REFERENCE_PASSES[key]
    if len(keep) == len(visible.tests):
        return visible
    if not keep:
        return None
    tests = CallTests(
        tuple(visible.tests.inputs[i] for i in keep),
        tuple(visible.tests.expected[i] for i in keep),
        visible.tests.compare,
    )
    return _described(task, tests, visible.source)


# task (id, prompt, reference) -> indices of the prompt examples its reference passes; one run
# per task for a whole evaluation or training run, however many episodes it has.
_REFERENCE_PASSES: dict[tuple[str, str, str], tuple[int, ...]] = {}


def prompt_examples(prompt: str, entry_point: str) -> CallTests | None:
    """The prompt's examples with literal arguments and results: `>>> entry(args)` lines each
    followed by the result line, and inline `entry(args) == result` (or `=>`, `➞`, `->`, ...)."""
    lines = prompt.splitlines()
    found: dict[str, tuple[tuple[Any, ...], Any]] = {}  # repr of the arguments -> example
    for i, line in enumerate(lines):
        text = line.strip()
        if text.startswith(">>> "):
            result = lines[i + 1].strip() if i + 1 < len(lines) else ""
            example = _example(text[4:], result, entry_point)
        else:
            example = _inline_example(text, entry_point)
        if example is not None:
            found.setdefault(repr(example[0]), example)
    if not found:
        return None
    inputs, expected = zip(*found.values(), strict=True)
    return CallTests(tuple(inputs), tuple(expected))


def _inline_example(text: str, entry_point: str) -> tuple[tuple[Any, ...], Any] | None:
    start = text.find(entry_point + "(")
    if start < 0 or (start > 0 and (text[start - 1].isalnum() or text[start - 1] in "_.")):
        return None
    rest = text[start:]
    for arrow in INLINE_ARROWS:
        call, sep, result = rest.partition(arrow)
        if sep:
            return _example(call.strip(), result.strip().rstrip(".,;"), entry_point)
    return None


def _example(call: str, result: str, entry_point: str) -> tuple[tuple[Any, ...], Any] | None:
    args = _literal_call(call, entry_point)
    if args is None or not result or result.startswith(">>>"):
        return None
    try:
        return args, ast.literal_eval(result)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def _literal_call(source: str, entry_point: str) -> tuple[Any, ...] | None:
    try:
        node = ast.parse(source, mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        return None
    if node.func.id != entry_point or node.keywords:
        return None
    try:
        return tuple(ast.literal_eval(a) for a in node.args)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def _assert_as_call(statement: str, entry_point: str | None) -> CallTests | None:
    """`assert f(args) == expected` with literal arguments, as a call test (so feedback can
    say what the program returned); None for any other assert."""
    try:
        node = ast.parse(statement.strip()).body[0]
    except (SyntaxError, ValueError, IndexError, MemoryError, RecursionError):
        return None
    test = getattr(node, "test", None)
    if not (isinstance(node, ast.Assert) and isinstance(test, ast.Compare) and entry_point):
        return None
    if len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq):
        return None
    args = _literal_call(ast.unparse(test.left), entry_point)
    try:
        value = ast.literal_eval(test.comparators[0])
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return None if args is None else CallTests((args,), (value,))


def _head(tests: Tests, n: int) -> Tests:
    if isinstance(tests, CallTests):
        return tests[:n]
    if isinstance(tests, StdioTests):
        return replace(tests, cases=tests.cases[:n])
    if isinstance(tests, AssertTests):
        return replace(tests, statements=tests.statements[:n])
    raise ValueError(f"a configured visible split needs unit tests, not {type(tests).__name__}")


def _described(task: Task, tests: Tests, source: str) -> VisibleTests:
    if isinstance(tests, CallTests):
        name = task.entry_point or "f"
        shown = tuple(f"{name}({', '.join(_cut(repr(a)) for a in args)})" for args in tests.inputs)
        expected = tuple(_cut(describe_value(v, SHOWN_CHARS)) for v in tests.expected)
    elif isinstance(tests, StdioTests):
        shown = tuple(_cut(c.stdin) for c in tests.cases)
        expected = tuple(_cut(c.stdout) for c in tests.cases)
    elif isinstance(tests, AssertTests):
        shown = tuple(_cut(s) for s in tests.statements)
        expected = ("",) * len(tests.statements)  # the assert line holds its expected value
    else:
        raise ValueError(f"task {task.id}: self-correction needs unit tests, not a verifier")
    return VisibleTests(tests, shown, expected, source)


def _cut(text: str) -> str:
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + " ..."


def first_failure(result: ExecutionResult) -> TestOutcome | None:
    return next((t for t in result.tests if t.verdict is not Verdict.PASSED), None)


def feedback_text(visible: VisibleTests, result: ExecutionResult, program: str | None) -> str:
    """What the model reads after a failed attempt: the visible test that failed, its input,
    what the program returned or printed, the expected value, and the exception with its line."""
    if program is None:
        return "No code was found in your answer. Write the whole solution in one code block."
    failed = first_failure(result)
    if failed is None or not 0 <= failed.index < len(visible.shown):
        # a run-level failure (syntax error, crash on load, time limit before any test)
        where = (
            f" (line {result.line}: {_source_line(program, result.line)})" if result.line else ""
        )
        return f"Your code failed before any test ran: {result.verdict}: {result.message}{where}"
    i = failed.index
    parts = [f"Your code failed a visible test ({visible.source}, test {i + 1})."]
    if isinstance(visible.tests, StdioTests):
        parts.append(f"Input:\n{visible.shown[i]}")
    else:
        parts.append(f"Test: {visible.shown[i]}")
    if visible.expected[i]:
        label = "Expected output" if isinstance(visible.tests, StdioTests) else "Expected"
        parts.append(f"{label}: {visible.expected[i]}")
    got = _got(visible, failed)
    if got is not None:
        label = "Your output" if isinstance(visible.tests, StdioTests) else "Your code returned"
        parts.append(f"{label}: {got}")
    elif failed.verdict is not Verdict.WRONG_ANSWER or failed.exception:
        exc = f"{failed.exception}: {failed.message}" if failed.exception else failed.message
        line = (
            f" at line {failed.line}: {_source_line(program, failed.line)}" if failed.line else ""
        )
        parts.append(f"Error ({failed.verdict}): {_cut(exc)}{line}")
    return "\n".join(parts)


def verdict_text(result: ExecutionResult, program: str | None) -> str:
    """`env.feedback = "verdict"`: that the attempt failed and how, nothing about any test."""
    if program is None:
        return "No code was found in your answer. Write the whole solution in one code block."
    if first_failure(result) is None:
        return f"Your code failed before any test ran: {result.verdict}."
    return "Your code failed a visible test."


_GOT = re.compile(r"^expected .*, got (.*)$", re.S)


def _got(visible: VisibleTests, failed: TestOutcome) -> str | None:
    """The returned value or output of a wrong answer, from the grader's comparison message
    ("expected E, got G", with E the visible test's own expected value)."""
    if failed.verdict is not Verdict.WRONG_ANSWER or failed.exception:
        return None
    prefix = f"expected {visible.expected[failed.index]}, got "
    if isinstance(visible.tests, CallTests):
        prefix = f"expected {describe_value(visible.tests.expected[failed.index], 200)}, got "
    elif isinstance(visible.tests, StdioTests):
        prefix = f"expected {describe_value(visible.tests.cases[failed.index].stdout, 200)}, got "
    if failed.message.startswith(prefix):
        got = failed.message[len(prefix) :]
    else:
        match = _GOT.match(failed.message)
        if match is None:
            return None
        got = match.group(1)
    if isinstance(visible.tests, StdioTests):  # printed text is shown as text, not its repr
        try:
            printed = ast.literal_eval(got)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return _cut(got)  # cut by the grader: the repr stays
        return _cut(printed) if isinstance(printed, str) else _cut(got)
    return _cut(got)


def _source_line(program: str, line: int | None) -> str:
    lines = program.splitlines()
    return lines[line - 1].strip() if line and 0 < line <= len(lines) else ""
