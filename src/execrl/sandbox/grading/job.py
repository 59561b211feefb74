"""A job: one program and the tests to grade it with, as the pool receives it."""

from __future__ import annotations

import ast
import base64
import functools
import sys
from dataclasses import dataclass, field
from typing import Any

from execrl.sandbox.grading.limits import Limits
from execrl.tasks import values
from execrl.tasks.schema import AssertTests, CallTests, StdioTests, Task, Tests, job_limits

REFERENCE_MEMORY_MB = 4096  # what a reference run gets where its task names no memory limit


def reference_limits(task: Task) -> Limits:
    """The limits a run of the task's reference solution gets, in `tasks validate` and in
    `sandbox bench` alike: the benchmark's own (EvalPlus: per-test limits derived from the
    reference's measured time, with EvalPlus's floor; else `schema.DEFAULT_WALL_S`), with
    REFERENCE_MEMORY_MB unless the task names its memory."""
    return Limits(**{"memory_mb": REFERENCE_MEMORY_MB, **job_limits(task)})


@dataclass(frozen=True, slots=True)
class Job:
    program: str  # the whole program the candidate's code becomes
    tests: Tests
    entry_point: str | None = None
    limits: Limits = field(default_factory=Limits)
    strict_returns: bool = True  # entry-point returns must be plain data (assert tests)
    # Let the program start processes too; threads it may always start (both count against
    # Limits.processes). Off by default: a forked copy of the harness would go on with the tests.
    # In assert-style tests no thread may outlive the call that started it (`sandbox.leftovers`).
    allow_threads: bool = False
    id: str = ""
    # Another language than Python (`languages.LANGUAGES`): the program is compiled (C, C++,
    # Verilog) and exec'd in the confined child; its tests must be stdin/stdout tests.
    language: str = "python"
    # Files written into the scratch directory before the run, (relative path, bytes) each, and
    # files read back after it (in ExecutionResult.extra["files"], bytes or None if absent).
    files: tuple[tuple[str, bytes], ...] = ()
    fetch_files: tuple[str, ...] = ()
    # Stdin/stdout tests: stop at the first failing case, for rewards that need only pass/fail
    # (`first_failure`). The verdict is the full run's (the first failing case decides it either
    # way); the cases after it are not run, so the per-case outcomes stop there and
    # ExecutionResult.extra["skipped_after_failure"] counts the cases left out.
    stop_at_first_failure: bool = False

    @classmethod
    def for_task(
        cls, task: Task, program: str, limits: Limits, tests: Tests | None = None, **options: Any
    ) -> Job:
        """A job of `program` graded as `task` is: after the task's prelude, with its tests (or
        `tests`, one of its groups), entry point, return rule, id and language (a C task's
        program is compiled as C, never run as Python), whatever path builds it."""
        return cls(
            program=task.with_prelude(program),
            tests=task.tests if tests is None else tests,
            entry_point=task.entry_point,
            limits=limits,
            strict_returns=task.strict_returns,
            id=task.id,
            language=task.language,
            **options,
        )

    def __post_init__(self) -> None:
        name = self.id or "<unnamed>"
        # A verifier chooses the language of each run it makes (sandbox/verifiers); the task's
        # language ("sql", "verilog") says what the candidate is, and is not checked here.
        if self.language != "python" and self.tests.kind != "verifier":
            from execrl.sandbox.grading import languages

            try:
                canonical = languages.canonical(self.language)
            except languages.LanguageUnavailable as exc:
                raise ValueError(f"job {name}: {exc}") from None
            object.__setattr__(self, "language", canonical)
            if canonical != "python" and not isinstance(self.tests, StdioTests):
                raise ValueError(
                    f"job {name}: {canonical} programs take stdin/stdout tests only; "
                    f"got {type(self.tests).__name__}"
                )
        if (self.files or self.fetch_files) and not isinstance(self.tests, StdioTests):
            raise ValueError(f"job {name}: files and fetch_files need stdin/stdout tests")
        for path in [p for p, _ in self.files] + list(self.fetch_files):
            if not _relative_path(path):
                raise ValueError(
                    f"job {name}: file path {path!r} must be relative, inside the run's directory"
                )
        if len(self.tests) == 0:
            raise ValueError(
                f"job {self.id or '<unnamed>'}: the tests are empty; a task must have tests"
            )
        if isinstance(self.tests, CallTests):
            if not self.entry_point:
                raise ValueError(f"job {self.id or '<unnamed>'}: call tests need an entry point")
            if len(self.tests.expected) != len(self.tests.inputs):
                raise ValueError(
                    f"job {self.id or '<unnamed>'}: {len(self.tests.inputs)} inputs but {len(self.tests.expected)} expected values"
                )

    def units(self) -> list[dict[str, Any]]:
        """What the worker receives. Expected values of call and stdio tests stay here."""
        base = {
            "program": self.program,
            "entry_point": self.entry_point,
            "allow_threads": self.allow_threads,
        }
        t = self.tests
        if isinstance(t, AssertTests):
            source = t.setup + "\n" + "\n".join(t.statements)
            return [
                dict(
                    base,
                    kind="assert",
                    setup=t.setup,
                    statements=list(t.statements),
                    strict_returns=self.strict_returns,
                    imports=imported_modules(source),
                    borrowed=borrowed_modules(source),
                )
            ]
        if isinstance(t, CallTests):
            inputs = [values.encode(tuple(args)) for args in t.inputs]
            # With a per-test clock the harness says when each call returns (`watch`).
            clocked = self.limits.test_wall_s is not None
            return [dict(base, kind="call", inputs=inputs, clocked=clocked)]
        if isinstance(t, StdioTests):
            if self.language != "python":
                from execrl.sandbox.grading import languages

                base.update(languages.commands(self.language))
                base["source_name"] = base.pop("source")
            if self.files:
                base["files"] = {p: base64.b64encode(d).decode() for p, d in self.files}
            if self.fetch_files:
                base["fetch"] = list(self.fetch_files)
            if self.stop_at_first_failure:
                base["stop"] = True  # the worker stops after a case it can see fail
            return [dict(base, kind="stdio", stdin=case.stdin) for case in t.cases]
        raise TypeError(f"unknown tests type {type(t).__name__}")


def _relative_path(path: str) -> bool:
    parts = path.split("/")
    return bool(path) and not path.startswith("/") and "\0" not in path and ".." not in parts


@functools.lru_cache(maxsize=1024)
def _modules(source: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(what the test code imports or uses, the standard modules among those it uses without
    importing them), from one parse. Cached: every sample of a task carries the same test code,
    and parsing it was half the pool's work per run."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return (), ()
    imported: set[str] = set()
    loaded, bound = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
            if isinstance(node, ast.Import):
                imported.update(a.name for a in node.names)
            elif node.module and node.level == 0:
                imported.add(node.module)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
    # Standard modules the test code uses without importing them (MBPP's tests call
    # `sys.getsizeof` and rely on the program's `import sys`).
    borrowed = tuple(sorted((loaded - bound) & sys.stdlib_module_names))
    return tuple(sorted(imported | set(borrowed))), borrowed


def imported_modules(source: str) -> list[str]:
    """Modules the test code imports or uses: the harness snapshots them before the candidate
    runs, and restores them after each call into it."""
    return list(_modules(source)[0])


def borrowed_modules(source: str) -> list[str]:
    """Standard modules the tests use by a name the program defines: the tests get the real
    module under that name, not what the program bound to it (`harness._run_asserts`)."""
    return list(_modules(source)[1])
