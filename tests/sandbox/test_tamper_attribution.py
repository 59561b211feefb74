"""Attack class: what the tests do to a module is not the program's tampering.

The harness puts back, after every call into the program, the modules the tests use, and
reports what it had to undo as the program's tampering. Tests may change those modules
themselves between calls (KodCode's tests redirect `sys.stdout` to capture what the program
prints): that is the tests' own doing, and the program must not be blamed for it, while a
program that changes them during its call still is."""

from __future__ import annotations

from execrl.sandbox import Job, Verdict
from execrl.tasks.schema import AssertTests

CAPTURE = """
import io
import sys

def test_prints_greeting():
    buffer = io.StringIO()
    saved = sys.stdout
    sys.stdout = buffer
    try:
        greet()
    finally:
        sys.stdout = saved
    assert buffer.getvalue() == "hi\\n"

def test_still_redirected():
    sys.stdout = io.StringIO()
    greet()
    greet()

def test_redirect_stdout():
    import contextlib
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        greet()
    assert buffer.getvalue() == "hi\\n"
"""


def _job(program: str) -> Job:
    statements = ("test_prints_greeting()", "test_still_redirected()", "test_redirect_stdout()")
    tests = AssertTests(CAPTURE, statements)
    return Job(program, tests, entry_point="greet")


def test_a_stream_the_tests_redirect_is_not_blamed_on_the_program(sandbox):
    result = sandbox.run(_job("def greet():\n    print('hi')\n"))
    assert result.verdict is Verdict.PASSED, (result.verdict, result.message)


def test_a_stream_the_program_redirects_is_still_its_tampering(sandbox):
    program = "import sys, io\ndef greet():\n    print('hi')\n    sys.stdout = io.StringIO()\n"
    result = sandbox.run(_job(program))
    assert result.verdict is not Verdict.PASSED
    assert "modified module sys" in result.message
