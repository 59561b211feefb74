"""Which of a prompt's definitions join the tests (`tasks.prompt_helpers`), read by hand."""

from __future__ import annotations

from execrl.tasks.schema import AssertTests, Task

PROMPT = '''import math

SCALE = 2


def helper(x):
    return inner(x) * SCALE


def inner(x):
    return math.floor(x)


def also_to_write(x):
    """The program writes this one too."""


class Box:
    def get(self):
        ...


def f(x):
    """The entry point."""
'''


def _task(statements: tuple[str, ...], setup: str = "") -> Task:
    return Task(id="t", prompt=PROMPT, tests=AssertTests(setup, statements), entry_point="f")


def test_a_called_helper_comes_with_what_it_uses_and_the_prompt_s_imports():
    setup = _task(("assert f(1.5) == helper(1.5)",)).tests.setup
    assert "import math" in setup and "SCALE = 2" in setup
    assert "def helper" in setup and "def inner" in setup


def test_stubs_the_program_writes_are_never_taken():
    """The entry point, a docstring-only function, a class with a `...` method."""
    setup = _task(("assert f(1) == also_to_write(1) == Box().get()",)).tests.setup
    assert setup == ""


def test_binding_twice_changes_nothing():
    once = _task(("assert f(1) == helper(1)",))
    again = Task(id="t", prompt=PROMPT, tests=once.tests, entry_point="f")
    assert again.tests == once.tests


def test_a_prose_prompt_binds_nothing():
    task = Task(id="t", prompt="Write f.", tests=AssertTests("", ("assert f(1)",)))
    assert task.tests.setup == ""


def test_a_prose_prompt_s_fenced_code_defines_helpers_too():
    prompt = f"Use the helpers below.\n\n```python\n{PROMPT}```\n\nWrite f."
    task = Task(id="t", prompt=prompt, tests=AssertTests("", ("assert f(1) == helper(1)",)))
    assert "def helper" in task.tests.setup and "def inner" in task.tests.setup
    assert "Use the helpers" not in task.tests.setup
