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


# KodCode's other shape: the tests point `sys.stdout` at a file they opened, call the program,
# put the original back and read the file.
TO_A_FILE = """
import sys

def test_prints_to_a_file():
    original = sys.stdout
    with open("captured.txt", "w") as handle:
        sys.stdout = handle
        greet()
    sys.stdout = original
    with open("captured.txt") as handle:
        assert handle.read() == "hi\\n"
"""


def _file_job(program: str) -> Job:
    return Job(program, AssertTests(TO_A_FILE, ("test_prints_to_a_file()",)), entry_point="greet")


def test_a_file_the_tests_redirect_to_is_not_blamed_on_the_program(sandbox):
    result = sandbox.run(_file_job("def greet():\n    print('hi')\n"))
    assert result.verdict is Verdict.PASSED, (result.verdict, result.message)


def test_a_file_the_program_redirects_to_is_still_its_tampering(sandbox):
    """A program that leaves `sys.stdout` on a file of its own (so the tests' capture reads
    nothing, or what it planted there) is caught as before, files being allowed to the tests."""
    program = (
        "import sys\ndef greet():\n    print('hi')\n"
        "    sys.stdout = open('planted.txt', 'w')\n    sys.stdout.write('hi\\n')\n"
    )
    result = sandbox.run(_file_job(program))
    assert result.verdict is not Verdict.PASSED
    assert "modified module sys" in result.message
