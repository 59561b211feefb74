"""Shared builders for sandbox tests."""

from __future__ import annotations

from execrl.sandbox import Job, Limits
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
