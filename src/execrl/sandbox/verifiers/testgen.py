"""`testgen`: the candidate is a test suite for a given function; it is scored by running it
against the function's reference and against wrong versions of it (mutants, known-wrong
programs), each in a sandbox run of its own.

Score (components `passes_reference`, `kill_rate`, `coverage`):
- the suite must pass on the reference, else the score is 0: a suite that rejects the right
  function tests nothing;
- `kill_rate`: the fraction of the task's wrong programs it rejects (fails on, crashes on, or
  runs past `SUITE_S` on), over the wrong programs the benchmark's own tests reject. Mutants no
  test can tell from the reference (equivalent mutants) would otherwise cap every suite below
  the maximum; keeping only those the benchmark's tests kill makes them the yardstick, so the
  benchmark's tests, the task's reference answer, score 1.0;
- `coverage`: the fraction of the reference's lines that the benchmark's tests execute which
  the suite's calls execute too (line coverage, measured by replaying the suite's calls on the
  reference: `testgen_runner`), so it is 1.0 for the benchmark's tests as well;
- score = KILL_WEIGHT x kill_rate + COVERAGE_WEIGHT x coverage. The coverage term is dense: a
  suite that calls the function on telling inputs earns it before it asserts the right values,
  and can never earn more than COVERAGE_WEIGHT without rejecting wrong programs. PASSED when
  the suite rejects every wrong program the benchmark's tests reject.

Which wrong programs the benchmark's tests reject, and the lines they cover, are measured once
per task and process, by running the task's reference suite (spec.reference_suite) as a
candidate is run (its runs ride along with the first request for the task), and kept in the
parent's memory. A reference the benchmark's tests fail, or a task where they reject no wrong
program, is the task's error (`VerifierSpecError`).

What a suite can see of the program, and what it cannot, is the runner's to enforce
(`testgen_runner`'s docstring): it calls the function by name; the program's source is on no
disk and in no linecache, its code objects are denied, and the runs of one suite differ in
nothing but the program, so only behaviour tells a mutant from the reference. Each result line
is sealed with a key derived from the run's task, suite, program and a per-process secret.

spec: `entry_point`, `reference_program` (as the mutants' layout: `mutants.normalise`),
`mutants` (programs), `mutant_operators` (each mutant's operator, for feedback), `known_wrong`
(programs known wrong, e.g. HumanEvalFix's buggy solutions), `reference_suite`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import secrets
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from execrl.sandbox.confine.hidden_paths import sandbox_interpreter
from execrl.sandbox.grading.artifacts import program_job, program_run
from execrl.sandbox.grading.job import Job
from execrl.sandbox.grading.verdict import ExecutionResult, Verdict
from execrl.sandbox.run import audit_hook, frameless, protocol
from execrl.sandbox.verifiers import testgen_runner
from execrl.sandbox.verifiers.base import (
    Verification,
    VerifierSpecError,
    VerifyRequest,
    strip_fence,
)

KILL_WEIGHT = 0.8
COVERAGE_WEIGHT = 0.2
RUN_WALL_S = testgen_runner.SUITE_S + testgen_runner.REPLAY_S + 4.0  # + the interpreter's start
_SECRET = secrets.token_bytes(16)  # per process: the keys of the runs' result lines


@dataclass(frozen=True, slots=True)
class SuiteRun:
    """What one run of a suite against one program said, as the parent read it."""

    passed: bool  # the suite ran to its end on the program without an exception
    covered: frozenset[int]  # lines of the program its calls executed (reference runs only)
    error: str  # why it did not pass


@dataclass(frozen=True, slots=True)
class Calibration:
    """What the benchmark's own tests do on a task: the wrong programs they reject (indices
    into the task's programs) and the reference's lines their calls execute."""

    rejected: tuple[int, ...]
    lines: frozenset[int]


@dataclass(frozen=True, slots=True)
class TaskPrograms:
    """A task's data, read from its spec once per request."""

    entry: str
    programs: tuple[str, ...]  # the reference first, then the mutants, then the known-wrong
    labels: tuple[str, ...]  # what each program is, for feedback
    reference_suite: str


class TestgenVerifier:
    name = "testgen"
    components = ("passes_reference", "kill_rate", "coverage")

    def __init__(self) -> None:
        self._calibrations: dict[str, Calibration] = {}
        self._lock = threading.Lock()

    def jobs(self, request: VerifyRequest) -> Sequence[Job]:
        task = _read_spec(request)
        suite = strip_fence(request.program)
        runs = _suite_jobs(suite, task, request)
        with self._lock:
            known = _task_key(task) in self._calibrations
        return runs if known else [*runs, *_suite_jobs(task.reference_suite, task, request)]

    def verify(self, request: VerifyRequest, runs: Sequence[ExecutionResult]) -> Verification:
        task = _read_spec(request)
        n = len(task.programs)
        if len(runs) == 2 * n:
            calibration = _calibrate(request, task, runs[n:])
            with self._lock:
                self._calibrations[_task_key(task)] = calibration
        with self._lock:
            calibration = self._calibrations[_task_key(task)]
        suite = strip_fence(request.program)
        results = [_read(run, _key_of(request, suite, i)) for i, run in enumerate(runs[:n])]
        return score(results, calibration, task.labels)


def score(
    results: Sequence[SuiteRun], calibration: Calibration, labels: Sequence[str]
) -> Verification:
    """The verification of a suite from its runs (the reference's first), by the module
    docstring's rule."""
    reference = results[0]
    if not reference.passed:
        zero = {"passes_reference": 0.0, "kill_rate": 0.0, "coverage": 0.0}
        feedback = f"the suite fails on the correct function: {reference.error}"
        return Verification(0.0, zero, Verdict.WRONG_ANSWER, feedback)
    survivors = [i for i in calibration.rejected if results[i].passed]
    kill_rate = 1.0 - len(survivors) / len(calibration.rejected)
    lines = calibration.lines
    coverage = len(reference.covered & lines) / len(lines) if lines else kill_rate
    total = KILL_WEIGHT * kill_rate + COVERAGE_WEIGHT * coverage
    components = {"passes_reference": 1.0, "kill_rate": kill_rate, "coverage": coverage}
    rejected = len(calibration.rejected) - len(survivors)
    feedback = (
        f"passes on the correct function; rejects {rejected} of {len(calibration.rejected)} "
        f"wrong versions; runs {coverage:.0%} of the lines the benchmark's tests run"
    )
    if survivors:
        kinds = sorted({labels[i] for i in survivors})
        feedback += f"; not caught: {', '.join(kinds)}"
    verdict = Verdict.PASSED if not survivors else Verdict.WRONG_ANSWER
    return Verification(min(1.0, total), components, verdict, feedback)


def _calibrate(
    request: VerifyRequest, task: TaskPrograms, runs: Sequence[ExecutionResult]
) -> Calibration:
    results = [_read(run, _key_of(request, task.reference_suite, i)) for i, run in enumerate(runs)]
    if not results[0].passed:
        raise VerifierSpecError(
            f"task {request.task_id}: the benchmark's own tests (spec.reference_suite) fail on "
            f"the reference: {results[0].error}"
        )
    rejected = tuple(i for i in range(1, len(results)) if not results[i].passed)
    if not rejected:
        raise VerifierSpecError(
            f"task {request.task_id}: the benchmark's own tests reject none of the "
            f"{len(results) - 1} wrong programs, so no suite can be scored; drop the task"
        )
    return Calibration(rejected, results[0].covered)


def _read_spec(request: VerifyRequest) -> TaskPrograms:
    entry = request.field("entry_point", str)
    if not entry.isidentifier():
        raise VerifierSpecError(f"task {request.task_id}: spec.entry_point must be a name")
    mutants = _strings(request, "mutants")
    operators = _strings(request, "mutant_operators")
    known_wrong = _strings(request, "known_wrong")
    if len(operators) != len(mutants):
        raise VerifierSpecError(
            f"task {request.task_id}: spec.mutant_operators must name each of spec.mutants"
        )
    if not mutants and not known_wrong:
        raise VerifierSpecError(f"task {request.task_id}: the task has no wrong program")
    programs = (request.field("reference_program", str), *mutants, *known_wrong)
    labels = (
        "the reference",
        *(f"a mutant ({op})" for op in operators),
        *("a known wrong solution" for _ in known_wrong),
    )
    return TaskPrograms(entry, programs, labels, request.field("reference_suite", str))


def _strings(request: VerifyRequest, key: str) -> tuple[str, ...]:
    values = request.field(key, list)
    if not all(isinstance(v, str) for v in values):
        raise VerifierSpecError(f"task {request.task_id}: spec.{key} must be a list of strings")
    return tuple(values)


def _suite_jobs(suite: str, task: TaskPrograms, request: VerifyRequest) -> list[Job]:
    limits = replace(
        request.limits,
        wall_s=max(request.limits.wall_s, RUN_WALL_S),
        cpu_s=max(request.limits.cpu_s or 0.0, RUN_WALL_S + 1),
        test_wall_s=None,
    )
    launcher = f"exec {sandbox_interpreter()} -I runner.py\n"
    files = (("runner.py", _runner_source()), ("suite.py", suite.encode()), *_shipped_modules())
    jobs = []
    for i, program in enumerate(task.programs):
        header = json.dumps({"entry": task.entry, "coverage": i == 0})
        stdin = f"{_key_of(request, suite, i).hex()}\n{header}\n{program}"
        jobs.append(
            program_job(
                launcher,
                language="bash",
                stdin=stdin,
                files=files,
                limits=limits,
                job_id=request.task_id,
            )
        )
    return jobs


def _read(result: ExecutionResult, key: bytes) -> SuiteRun:
    """A run's sealed line; a run without exactly one good line rejected the program."""
    run = program_run(result)
    if not run.ran:
        return SuiteRun(False, frozenset(), f"the run did not end normally: {run.message}")
    mark = testgen_runner.MARK
    lines = [ln[len(mark) :] for ln in run.stdout.splitlines() if ln.startswith(mark)]
    reader = protocol.ChannelReader(key)
    reader.feed("".join(f"{ln}\n" for ln in lines).encode(errors="replace"), final=True)
    if reader.broken or len(reader.events) != 1:
        return SuiteRun(False, frozenset(), "the suite printed result lines of its own")
    out: dict[str, Any] = reader.events[0]
    covered = out.get("covered")
    lines_covered = frozenset(
        v for v in (covered if isinstance(covered, list) else ()) if type(v) is int
    )
    return SuiteRun(out.get("passed") is True, lines_covered, str(out.get("error") or ""))


@functools.cache
def _runner_source() -> bytes:
    return Path(testgen_runner.__file__ or "").read_bytes()


@functools.cache
def _shipped_modules() -> tuple[tuple[str, bytes], ...]:
    """execrl's own channel seal, audit hook and frameless tracebacks, as the chart verifier
    ships them: the runner's interpreter runs isolated (-I) and need not see execrl."""
    return tuple(
        (f"{module.__name__.rsplit('.', 1)[1]}.py", Path(module.__file__ or "").read_bytes())
        for module in (protocol, audit_hook, frameless)
    )


def _task_key(task: TaskPrograms) -> str:
    blob = json.dumps([task.entry, task.programs, task.reference_suite])
    return hashlib.sha256(blob.encode()).hexdigest()


def _key_of(request: VerifyRequest, suite: str, index: int) -> bytes:
    data = f"{request.task_id}\0{index}\0{suite}".encode()
    return hashlib.blake2b(data, key=_SECRET, digest_size=16).digest()
