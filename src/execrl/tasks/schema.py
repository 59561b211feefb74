"""The task schema shared by every loader, the sandbox and the rewards.

A task carries hidden tests (used for grading) and optional visible tests (safe to show in a
prompt). Tests come in three kinds:

- `AssertTests`: trusted test code run next to the candidate (HumanEval's `check(candidate)`,
  MBPP's assert lines). Each statement is one test.
- `CallTests`: argument lists for the entry point; the sandbox returns the outputs as plain data
  and the trusted parent compares them with the expected values, which never enter the sandbox.
- `StdioTests`: stdin for a whole program, with the expected stdout compared in the parent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SCHEMA_VERSION = 1


@dataclass(frozen=True, slots=True)
class Compare:
    """How the trusted parent compares an output with its expected value."""

    atol: float = 0.0  # absolute float tolerance; 0 means exact equality for floats
    rtol: float = 0.0  # relative float tolerance
    unordered: bool = False  # top-level lists/tuples compared as multisets
    case_insensitive: bool = False  # stdio only: compare tokens ignoring case
    tokens: bool = True  # stdio only: compare whitespace-separated tokens, not raw text


@dataclass(frozen=True, slots=True)
class AssertTests:
    setup: str = ""  # trusted code run in the test namespace first (defines check, imports)
    statements: tuple[str, ...] = ()  # each one test, e.g. "check(candidate)" or "assert f(1) == 2"
    kind: str = field(default="assert", init=False)

    def __len__(self) -> int:
        return len(self.statements)


@dataclass(frozen=True, slots=True)
class CallTests:
    inputs: tuple[tuple[Any, ...], ...] = ()  # positional arguments, one tuple per test
    expected: tuple[Any, ...] = ()  # one expected value per test; stays in the trusted parent
    compare: Compare = Compare()
    kind: str = field(default="call", init=False)

    def __len__(self) -> int:
        return len(self.inputs)


@dataclass(frozen=True, slots=True)
class StdioCase:
    stdin: str
    stdout: str


@dataclass(frozen=True, slots=True)
class StdioTests:
    cases: tuple[StdioCase, ...] = ()
    compare: Compare = Compare()
    kind: str = field(default="stdio", init=False)

    def __len__(self) -> int:
        return len(self.cases)


Tests = AssertTests | CallTests | StdioTests


@dataclass(frozen=True, slots=True)
class Task:
    id: str
    prompt: str
    tests: Tests  # hidden tests: what grading uses
    entry_point: str | None = None
    language: str = "python"
    reference: str | None = None  # a reference solution, as a whole program
    visible_tests: Tests | None = None  # tests that may be shown in the prompt
    metadata: dict[str, Any] = field(default_factory=dict)  # source, difficulty, split, ...
