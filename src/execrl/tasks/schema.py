"""The task schema shared by every loader, the sandbox and the rewards.

A task carries hidden tests (used for grading) and optional visible tests (safe to show in a
prompt). Tests come in three kinds:

- `AssertTests`: trusted test code run next to the candidate (HumanEval's `check(candidate)`,
  MBPP's assert lines). Each statement is one test.
- `CallTests`: argument lists for the entry point; the sandbox returns the outputs as plain
  data and the trusted parent compares them with the expected values, which never enter the sandbox.
- `StdioTests`: stdin for a whole program, with the expected stdout compared in the parent.

EvalPlus benchmarks (`humaneval+`, `mbpp+`) keep their base tests apart: `base_tests` holds the
original benchmark's inputs and `tests` holds the base tests followed by the plus tests, so
`tests` is what "plus" (base and plus both pass) grades, and `plus_tests` is the tail. The time
the official harness allows each group is in `time_limits`, keyed "tests", "base" and "plus".

The schema is versioned (`SCHEMA_VERSION`); `execrl.tasks.jsonl` reads and writes it as JSONL,
one task per line, and rejects a version it does not know.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from execrl.tasks.prompt_helpers import with_prompt_helpers

SCHEMA_VERSION = 1

# Names `Compare.oracle` accepts. "" is plain equality (with the tolerances above it); the
# "evalplus*" rules reproduce evalplus/eval/__init__.py's per-input check (v0.3.x), see
# sandbox/grading/compare.py for each.
ORACLES = (
    "",
    "evalplus",  # == first, else np.allclose(atol or 1e-6 for floats, rtol=1e-7) with type check
    "evalplus_set",  # set(got) == set(expected) (MBPP_OUTPUT_SET_EQ_TASKS)
    "evalplus_not_none",  # expected is `ref is not None` (MBPP_OUTPUT_NOT_NONE_TASKS)
    "evalplus_poly_root",  # expected holds the coefficients xs; |poly(xs, got)| <= atol (HE/32)
    "evalplus_or_close",  # expected is (reference output, alternative); |got - alt| <= atol
    "evalplus_or_equal",  # expected is (reference output, alternative); got == alt also passes
)

# Names `Compare.checker` accepts; `execrl.sandbox.grading.checkers` defines each ("" is the rules of
# the other Compare fields).
CHECKERS = (
    "",
    "tokens",  # whitespace-separated tokens, exact
    "float",  # tokens; numbers within atol or rtol (either), the rest exact
    "yesno",  # tokens; yes/no answers in any case, the rest exact
    "lines_unordered",  # the same lines, each stripped, in any order
    "livecodebench",  # lcb_runner: stdio line by line, else Decimal tokens; call: ==, tuples as lists
    "apps",  # APPS/TACO testing_util's cascade (stdio); call: ==, or == the output wrapped once
    "codecontests",  # code_contests' OutputsMatch: lowercase tokens, numbers within 1e-5
    "program",  # a custom checker program run in the sandbox (checker_source)
)


@dataclass(frozen=True, slots=True)
class Compare:
    """How the trusted parent compares an output with its expected value."""

    atol: float = 0.0  # absolute float tolerance; 0 means exact equality for floats
    rtol: float = 0.0  # relative float tolerance
    unordered: bool = False  # top-level lists/tuples compared as multisets
    case_insensitive: bool = False  # stdio only: compare tokens ignoring case
    tokens: bool = True  # stdio only: compare whitespace-separated tokens, not raw text
    # stdio only: a numeric token passes if its absolute OR its relative error is within
    # atol/rtol (problemtools' float_tolerance), rather than within atol + rtol*|expected|.
    either_tolerance: bool = False
    oracle: str = ""  # call only: a named rule from ORACLES instead of plain equality
    # A built-in checker from CHECKERS instead of the rules above (`sandbox/grading/checkers.py`), or
    # "program": `checker_source` in `checker_language` run in the sandbox, testlib-style.
    checker: str = ""
    checker_source: str = ""  # the custom checker's source (checker = "program")
    checker_language: str = "python"  # "python" or "cpp"

    def __post_init__(self) -> None:
        if self.oracle not in ORACLES:
            raise ValueError(f"unknown comparison oracle {self.oracle!r}; known: {ORACLES}")
        if self.checker not in CHECKERS:
            raise ValueError(f"unknown checker {self.checker!r}; known: {CHECKERS}")
        if (self.checker == "program") != bool(self.checker_source):
            raise ValueError("checker 'program' needs checker_source, and only it takes one")


@dataclass(frozen=True, slots=True)
class AssertTests:
    setup: str = ""  # trusted code run in the test namespace first (defines check, imports)
    statements: tuple[str, ...] = ()  # each one test, e.g. "check(candidate)" or "assert f(1) == 2"
    kind: str = field(default="assert", init=False)

    def __len__(self) -> int:
        return len(self.statements)

    def with_prompt_helpers(self, code: str, entry: str | None) -> AssertTests:
        """These tests with `with_prompt_helpers` applied to their setup, reading the names
        their statements call as well as the setup's."""
        setup = with_prompt_helpers(code, self.setup, entry, self.statements)
        return self if setup == self.setup else replace(self, setup=setup)


@dataclass(frozen=True, slots=True)
class CallTests:
    inputs: tuple[tuple[Any, ...], ...] = ()  # positional arguments, one tuple per test
    expected: tuple[Any, ...] = ()  # one expected value per test; stays in the trusted parent
    compare: Compare = Compare()
    kind: str = field(default="call", init=False)

    def __len__(self) -> int:
        return len(self.inputs)

    def __getitem__(self, s: slice) -> CallTests:
        return replace(self, inputs=self.inputs[s], expected=self.expected[s])


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


@dataclass(frozen=True, slots=True)
class VerifierTests:
    """A domain verifier grades the program instead of unit tests (`execrl.sandbox.verifiers`,
    docs/verifiers.md). `verifier` names it: "verilog", "sql", "chart", "optimize", or a user's
    "package.module:Class". `spec` is the task's data for it (plain JSON values); the verifier
    decides what of it enters the sandbox (a schema, an instance), and expected results stay in
    the trusted parent. It counts as one test: the verifier's verdict on the whole program."""

    verifier: str
    spec: dict[str, Any] = field(default_factory=dict)
    # A wrong program for this task: `execrl tasks validate` checks it scores below the reference.
    wrong: str = ""
    kind: str = field(default="verifier", init=False)

    def __post_init__(self) -> None:
        if not self.verifier:
            raise ValueError('verifier tests: name the verifier (e.g. "sql" or "module:Class")')

    def __len__(self) -> int:
        return 1


Tests = AssertTests | CallTests | StdioTests | VerifierTests


@dataclass(frozen=True, slots=True)
class TimeLimit:
    """The time a benchmark's official harness gives one run of a group of tests."""

    wall_s: float  # the whole run
    test_wall_s: float | None = None  # each test (EvalPlus: the largest of its per-input limits)
    memory_mb: int | None = None  # the memory the benchmark allows a run, where it says


@dataclass(frozen=True, slots=True)
class Task:
    id: str
    prompt: str
    tests: Tests  # hidden tests: what grading uses (for EvalPlus: base then plus)
    entry_point: str | None = None
    language: str = "python"
    reference: str | None = None  # a reference solution, as a whole program
    visible_tests: Tests | None = None  # tests that may be shown in the prompt
    metadata: dict[str, Any] = field(default_factory=dict)  # source, difficulty, split, ...
    # EvalPlus only: the original benchmark's tests; `tests` starts with these same tests.
    base_tests: Tests | None = None
    # Time limits by group ("tests", "base", "plus"), where the benchmark defines them.
    time_limits: dict[str, TimeLimit] = field(default_factory=dict)
    # False where the benchmark's own tests need objects back from the entry point (QuixBugs'
    # linked-list nodes, MBPP+'s re.Match results): pass it to `Job.strict_returns`.
    strict_returns: bool = True
    # Code the benchmark's own harness puts before every program it runs (LiveCodeBench's
    # block of imports): every job of the task runs `with_prelude(program)`.
    prelude: str = ""

    def __post_init__(self) -> None:
        if len(self.tests) == 0:
            raise ValueError(f"task {self.id}: it has no tests; every task needs tests to grade")
        if self.base_tests is not None:
            if type(self.base_tests) is not type(self.tests) or isinstance(self.tests, StdioTests):
                raise ValueError(
                    f"task {self.id}: base_tests must be call or assert tests, of the kind of tests"
                )
            if len(self.tests) < len(self.base_tests):
                raise ValueError(f"task {self.id}: tests must start with the base_tests")
        for name in ("tests", "visible_tests", "base_tests"):
            tests = getattr(self, name)
            if isinstance(tests, AssertTests):  # frozen: set once, here, as the record is made
                object.__setattr__(
                    self, name, tests.with_prompt_helpers(self.prompt, self.entry_point)
                )

    def with_prelude(self, program: str) -> str:
        """`program` as the benchmark's harness runs it: after the prelude, if it has one."""
        return f"{self.prelude}\n\n{program}" if self.prelude else program

    @property
    def plus_tests(self) -> CallTests | AssertTests | None:
        """EvalPlus's plus tests alone (the tail of `tests`), or None for other benchmarks."""
        if self.base_tests is None:
            return None
        n = len(self.base_tests)
        if isinstance(self.tests, CallTests):
            return self.tests[n:]
        assert isinstance(self.tests, AssertTests)
        return replace(self.tests, statements=self.tests.statements[n:])


DEFAULT_WALL_S = 10.0  # benchmarks without official limits (HumanEval's harness uses 3 s per task)


def job_limits(task: Task, group: str = "tests") -> dict[str, Any]:
    """Keyword arguments for `Limits` from the task's own time limits, where it has them."""
    t = task.time_limits.get(group)
    if t is None:
        return {"wall_s": DEFAULT_WALL_S}
    kw: dict[str, Any] = {"wall_s": t.wall_s, "cpu_s": t.wall_s + 1}
    if t.test_wall_s is not None:
        kw["test_wall_s"] = t.test_wall_s
    if t.memory_mb is not None:
        kw["memory_mb"] = t.memory_mb
    return kw
