"""Stop at the first failing stdin/stdout case: a sample with hundreds of cases, cheap.

A reward that needs only pass/fail (`Job.stop_at_first_failure`) needs no case after the first
one that fails. Two parts stop there:

- the worker cuts its reply after a case it can see fail without the expected output (a crash,
  a timeout, a limit, a compile error: `worker._failed`); the expected outputs never reach the
  worker, whose runs are its forks and could read them from its memory;
- a wrong answer only the parent can see, so the parent sends each sample's cases in windows
  that grow (1, 4, 16, 64, ... cases) and sends no further window once one fails. The windows of
  one round run side by side on every worker; a sample that has fewer live windows than there
  are workers has its window split, so one long passing sample still keeps every worker busy.

The verdict and its message are the full run's: cases are graded exactly as `grade` grades them,
and the first failing case by index decides, however the windows fell. What differs: the
outcomes stop at that case, and the CPU and wall time count only the cases run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from execrl.sandbox.grading.grade import SKIPPED, _breaks_grading, _first_failure
from execrl.sandbox.grading.job import Job
from execrl.sandbox.grading.verdict import ExecutionResult, TestOutcome, Verdict
from execrl.tasks.schema import StdioTests

FIRST_WINDOW = 1  # most wrong programs fail the first case; a right one pays one extra request
GROWTH = 4  # a failure at case k costs at most about GROWTH * k cases
MIN_PIECE = 8  # a window is split among idle workers only into pieces this large


def stops_early(job: Job) -> bool:
    return job.stop_at_first_failure and isinstance(job.tests, StdioTests) and len(job.tests) > 1


@dataclasses.dataclass(slots=True)
class _Progress:
    """One sample's grading so far: the cases before `next_case` all passed."""

    job: Job
    next_case: int = 0
    window: int = FIRST_WINDOW
    outcomes: list[TestOutcome] = dataclasses.field(default_factory=list)
    pieces: list[ExecutionResult] = dataclasses.field(default_factory=list)
    result: ExecutionResult | None = None


def run_stopping(
    run: Callable[[Sequence[Job]], list[ExecutionResult]],
    jobs: Sequence[Job],
    workers: int,
    progress: Callable[[int], None] | None = None,
) -> list[ExecutionResult]:
    """Results of `jobs` (each `stops_early`) in order; `run` runs plain jobs (the pool below,
    whose `workers` a window is split among)."""
    states = [_Progress(job) for job in jobs]
    while live := [s for s in states if s.result is None]:
        pieces = _round(live, workers)
        by_state: dict[int, list[tuple[int, ExecutionResult]]] = {}
        for (state, _, start), result in zip(pieces, run([p for _, p, _ in pieces]), strict=True):
            by_state.setdefault(id(state), []).append((start, result))
        for state in live:
            _absorb(state, sorted(by_state[id(state)], key=lambda p: p[0]))
            if state.result is not None and progress is not None:
                progress(1)
    return [s.result for s in states if s.result is not None]


def _round(live: list[_Progress], workers: int) -> list[tuple[_Progress, Job, int]]:
    """This round's pieces: (sample, the job of one piece of its window, its first case)."""
    pieces: list[tuple[_Progress, Job, int]] = []
    split = max(1, workers // max(1, len(live)))
    for state in live:
        cases = state.job.tests.cases  # type: ignore[union-attr]
        end = min(len(cases), state.next_case + state.window)
        n_pieces = max(1, min(split, (end - state.next_case) // MIN_PIECE))
        bounds = [
            state.next_case + (end - state.next_case) * k // n_pieces for k in range(n_pieces + 1)
        ]
        for start, stop in zip(bounds, bounds[1:], strict=False):
            tests = dataclasses.replace(state.job.tests, cases=cases[start:stop])
            pieces.append((state, dataclasses.replace(state.job, tests=tests), start))
        state.window *= GROWTH
    return pieces


def _absorb(state: _Progress, pieces: list[tuple[int, ExecutionResult]]) -> None:
    """Take one round's pieces, in case order: stop at the first that failed."""
    n_tests = len(state.job.tests)
    for start, piece in pieces:
        state.pieces.append(piece)
        shifted = [dataclasses.replace(o, index=o.index + start) for o in piece.tests]
        state.outcomes.extend(shifted)
        failed = any(o.verdict is not Verdict.PASSED for o in shifted)
        complete = len(shifted) == piece.n_tests
        if piece.verdict is Verdict.SANDBOX_ERROR or (not failed and not complete):
            # The infrastructure failed, or the run ended before its cases did: that result,
            # as the full run would have had it.
            state.result = _merged(state, piece.verdict, piece.message, n_tests)
            return
        if failed:
            verdict, message = _first_failure(state.outcomes, n_tests)
            state.result = _merged(state, verdict, message, n_tests)
            return
        state.next_case = start + piece.n_tests
    if state.next_case >= n_tests:
        verdict, message = Verdict.PASSED, ""
        tampering = _all_tampering(state.pieces)
        broken = next((t for t in tampering if _breaks_grading(t)), None)
        if broken is not None:  # as `grade` decides it over all the cases
            verdict, message = Verdict.WRONG_ANSWER, f"tampering: {broken}"
        state.result = _merged(state, verdict, message, n_tests)


def _all_tampering(pieces: list[ExecutionResult]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(t for piece in pieces for t in piece.tampering))


def _merged(state: _Progress, verdict: Verdict, message: str, n_tests: int) -> ExecutionResult:
    pieces, last = state.pieces, state.pieces[-1]
    line = next(
        (o.line for o in state.outcomes if o.verdict is verdict and o.line is not None), None
    )
    extra = {k: v for k, v in last.extra.items() if k != SKIPPED}
    extra["exit_codes"] = [c for p in pieces for c in p.extra.get("exit_codes", [])]
    compiled = next((p.extra["compile"] for p in pieces if "compile" in p.extra), None)
    if compiled is not None:
        extra["compile"] = compiled
    if len(state.outcomes) < n_tests and verdict is not Verdict.PASSED:
        extra[SKIPPED] = n_tests - len(state.outcomes)  # not "tests the program cut short"
    return dataclasses.replace(
        last,
        verdict=verdict,
        tests=tuple(state.outcomes),
        n_tests=n_tests,
        message=message,
        line=line,
        cpu_s=sum(p.cpu_s for p in pieces),
        wall_s=sum(p.wall_s for p in pieces),
        peak_memory_kb=max(p.peak_memory_kb for p in pieces),
        attempts=max(p.attempts for p in pieces),
        tampering=_all_tampering(pieces),
        extra=extra,
    )
