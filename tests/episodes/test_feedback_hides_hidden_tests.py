"""Feedback never carries a hidden test's input or expected value, for every benchmark family:
a wrong answer to real tasks gets its feedback turn, which is searched for each hidden-only
test's input and expected value."""

from __future__ import annotations

import pytest

from execrl.rl.episodes import EnvConfig, make_env
from execrl.rl.episodes.visible import _assert_as_call, visible_tests
from execrl.tasks.catalog.registry import load_benchmark
from execrl.tasks.schema import AssertTests, CallTests, StdioTests, Task

N_TASKS = 4
MIN_CHARS = 4  # shorter values ("3", "[]") occur in any text: not evidence of a leak
PREFIX = 40  # a long value is looked for by a window of it (feedback cuts long values)


def wrong_answer(task: Task) -> str:
    if isinstance(task.tests, StdioTests):
        return "```python\nprint('Case #1: 0')\n```"
    if task.prompt.lstrip().startswith(("def ", "from ", "import ")):
        return "    return None\n"
    return f"```python\ndef {task.entry_point}(*args):\n    return None\n```"


def fingerprints(task: Task) -> list[str]:
    """Strings that identify the hidden tests no visible test shares."""
    visible = visible_tests(task)
    assert visible is not None, task.id
    public = {p.strip() for p in visible.shown + visible.expected}
    found: list[str] = []
    tests = task.tests
    if isinstance(tests, CallTests):
        for args, expected in zip(tests.inputs, tests.expected, strict=True):
            call = f"{task.entry_point}({', '.join(repr(a) for a in args)})"
            found += [call, repr(expected)]
    elif isinstance(tests, StdioTests):
        for case in tests.cases:
            found += [case.stdin.strip(), case.stdout.strip()]
    elif isinstance(tests, AssertTests) and tests == task.visible_tests:  # MBPP: all listed
        for statement in tests.statements[1:]:
            found.append(statement)
            call = _assert_as_call(statement, task.entry_point)
            if call is not None:
                found += [f"{task.entry_point}{call.inputs[0]!r}"[:-1], repr(call.expected[0])]
    else:  # HumanEval: the assert lines of check(); those the prompt shows are public
        lines = [ln.strip() for ln in tests.setup.splitlines() if "assert" in ln]
        found += [ln for ln in lines if ln not in task.prompt]
    marks = [_distinctive(f, public) for f in found if len(f) >= MIN_CHARS]
    return [m for m in marks if m is not None]


def _distinctive(value: str, public: set[str]) -> str | None:
    """A window of `value` (all of it when short) that no public text holds; None if none."""
    for start in range(0, max(len(value) - PREFIX, 0) + 1, PREFIX // 2):
        window = value[start : start + PREFIX]
        if not any(window in p for p in public):
            return window
    return None


@pytest.mark.parametrize(
    "benchmark",
    ["humaneval", "mbpp", "codejam", "synthetic:split=test,difficulty=2,n=4,seed=0"],
)
def test_feedback_never_holds_a_hidden_test(benchmark, data_dir, scorer):
    tasks = load_benchmark(benchmark, data_dir)[:N_TASKS]
    checked = 0
    for task in tasks:
        env = make_env(EnvConfig("self_correct", max_turns=2), scorer)
        env.reset(task)
        result = env.step(wrong_answer(task))
        assert not result.done and result.observation is not None, (task.id, result.info)
        feedback = result.observation.text + result.observation.raw.replace(task.prompt, "")
        assert "failed a visible test" in feedback, feedback
        for hidden in fingerprints(task):
            assert hidden not in feedback, (task.id, hidden, feedback)
            checked += 1
    assert checked >= N_TASKS  # the test looked for something in every family


def test_a_program_cannot_read_hidden_tests_into_its_feedback(scorer):
    """A program that raises all it can see (its globals; its callers' locals through a
    traceback, which the sandbox refuses) reaches no hidden test: the visible run holds the
    visible tests only. A protocol that fed back from the task's tests fails this (the first
    hidden test is the secret one)."""
    secret = 987654321
    prompt = 'def f(x):\n    """Double.\n    >>> f(2)\n    4\n    """\n'
    hidden = AssertTests(statements=(f"assert f({secret}) == {2 * secret}", "assert f(2) == 4"))
    task = Task("t/spy", prompt, hidden, entry_point="f")
    spy = (
        "    seen = [repr(globals())]\n"
        "    try:\n"
        "        raise KeyError\n"
        "    except KeyError as exc:\n"
        "        tb = exc.__traceback__\n"
        "        frame = tb.tb_frame\n"
        "        while frame is not None:\n"
        "            seen.append(repr(frame.f_locals)[:3000])\n"
        "            frame = frame.f_back\n"
        "    raise ValueError(' '.join(seen))\n"
    )
    env = make_env(EnvConfig("self_correct", max_turns=2), scorer)
    env.reset(task)
    result = env.step(spy)
    assert result.observation is not None
    text = result.observation.text
    assert str(secret) not in text and str(2 * secret) not in text, text
    assert "Test: f(2)" in text
