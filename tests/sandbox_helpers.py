"""Shared builders for sandbox tests."""

from __future__ import annotations

import dataclasses
import subprocess

from execrl.sandbox import Job, Limits, Verdict
from execrl.tasks import AssertTests, CallTests

HONEST = "def f(x):\n    return x + 1\n"


def assert_job(
    program: str, test: str = "assert f(1) == 2", setup: str = "", entry: str = "f", **limits
) -> Job:
    return Job(program, AssertTests(setup, (test,)), entry_point=entry, limits=Limits(**limits))


def call_job(program: str, inputs, expected, entry: str = "f", **limits) -> Job:
    return Job(
        program,
        CallTests(tuple(inputs), tuple(expected)),
        entry_point=entry,
        limits=Limits(**limits),
    )


HUMANEVAL_STYLE = (
    "def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(5) == 6\n"
)


def run_attack(sandbox, job, threads: bool = True):
    """Run an attack (threads and processes allowed, so the layers below the harness are
    tested): never PASSED, and the pool still grades honest code afterwards."""
    if threads:
        job = dataclasses.replace(job, allow_threads=True)
    result = sandbox.run(job)
    assert result.verdict is not Verdict.PASSED, (result.verdict, result.message, result.stdout)
    assert sandbox.run(assert_job(HONEST)).passed, (
        "the pool stopped grading honest code after the attack"
    )
    return result


ALWAYS_EQUAL = """
class AlwaysEqual:
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    __hash__ = object.__hash__
def f(x):
    return AlwaysEqual()
"""


def sandbox_processes(sandbox) -> list[str]:
    """Processes left under the pool's run uids (other pools may be running in parallel)."""
    uids = set(sandbox.worker_uids())
    assert uids, "these tests need the uid layer (run as root)"
    out = subprocess.run(
        ["ps", "-eo", "uid=,pid=,stat=,comm="], capture_output=True, text=True, check=True
    ).stdout
    return [line for line in out.splitlines() if int(line.split()[0]) in uids]
