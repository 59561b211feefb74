"""Custom checker programs: problems that accept several answers are judged by a program of the
problem's own (`Compare(checker="program", checker_source=..., checker_language=...)`).

How a job with such tests runs (the runner, `sandbox/runner.py`, hands it here with the pool's
plain runs below it):
1. The program runs on each case alone (one job per case, so each case's whole stdout comes
   back; the expected answer does not go with it). A case that fails on its own (crash,
   timeout, limits, a syntax error, tampering) keeps its verdict.
2. For each case that ran cleanly, the checker runs in the sandbox, testlib-style: its argv is
   `checker input.txt output.txt answer.txt` (testlib's order: the test's input, the program's
   output, the expected answer), the three files in its working directory. C++ checkers are
   compiled with the program's toolchain and must be self-contained (testlib.h is not shipped).
3. Its verdict is its exit status, as testlib's: 0 accepted (PASSED), 1 wrong answer or 2
   presentation error (WRONG_ANSWER). Anything else is the checker failing: an exit status of 3
   (testlib's `_fail`) or more, an uncaught exception, a signal, a timeout, a compile error.
4. A failing checker is rerun with the expected answer as the output. If it fails there too, the
   checker itself is broken: SANDBOX_ERROR (cause `checker_failed`), masked like any
   infrastructure failure. If it accepts the answer, it was the program's output that broke it:
   WRONG_ANSWER, flagged `possible_hack`, so no program escapes its penalty by crashing the
   judge.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from execrl.sandbox.grading.job import Job
from execrl.sandbox.grading.limits import Limits
from execrl.sandbox.grading.verdict import ExecutionResult, SandboxErrorCause, TestOutcome, Verdict
from execrl.tasks.schema import Compare, StdioCase, StdioTests

ARGV = ("checker", "input.txt", "output.txt", "answer.txt")
CHECKER_LIMITS = Limits(wall_s=10.0, memory_mb=1024, compile_wall_s=60.0)
# testlib's exit codes: 0 _ok, 1 _wa, 2 _pe; 3 is _fail (the checker's own failure).
_ACCEPTED, _REJECTED = 0, (1, 2)
# Outputs compared with nothing, raw: PASSED or WRONG_ANSWER both mean the process exited 0.
_NO_OUTPUT = Compare(tokens=False)

_PY_PRELUDE = f"import sys\nsys.argv = {list(ARGV)!r}\n"
_CPP_WRAPPER = (
    "#undef main\nint main() {\n"
    + "".join(f'  static char a{i}[] = "{a}";\n' for i, a in enumerate(ARGV))
    + "  char* argv[] = {a0, a1, a2, a3, nullptr};\n"
    + "  return execrl_checker_main(4, argv);\n}\n"
)


def needs_checker(job: Job) -> bool:
    return isinstance(job.tests, StdioTests) and job.tests.compare.checker == "program"


def checker_program(compare: Compare) -> str:
    """The checker's source with its argv fixed: Python's sys.argv set first; C++'s `main`
    renamed and called from a `main` that passes the argv."""
    if compare.checker_language == "python":
        return _PY_PRELUDE + compare.checker_source
    return "#define main execrl_checker_main\n" + compare.checker_source + "\n" + _CPP_WRAPPER


def run_checked(
    run: Callable[[Sequence[Job]], list[ExecutionResult]],
    jobs: Sequence[Job],
    progress: Callable[[int], None] | None = None,
) -> list[ExecutionResult]:
    """The results of `jobs`, each judged by its checker program; `run` runs plain jobs (the
    pool below)."""
    spans: list[tuple[int, int]] = []  # per job: its case runs in `expanded`
    expanded: list[Job] = []
    for job in jobs:
        assert isinstance(job.tests, StdioTests)
        spans.append((len(expanded), len(expanded) + len(job.tests.cases)))
        expanded += [_case_job(job, c) for c in job.tests.cases]
    ran = run(expanded) if expanded else []
    checks: dict[tuple[int, int], int] = {}  # (job, case) -> its checker run in check_jobs
    check_jobs: list[Job] = []
    for j, (job, (start, end)) in enumerate(zip(jobs, spans, strict=True)):
        for case, result in enumerate(ran[start:end]):
            if _ran_cleanly(result):
                checks[(j, case)] = len(check_jobs)
                check_jobs.append(_checker_job(job, case, _full_stdout(result)))
    verdicts = _check(run, check_jobs)
    out: list[ExecutionResult] = []
    for j, (job, (start, end)) in enumerate(zip(jobs, spans, strict=True)):
        judged = [
            verdicts[checks[(j, c)]] if (j, c) in checks else None for c in range(end - start)
        ]
        out.append(_combine(job, ran[start:end], judged))
    if progress is not None:
        progress(len(jobs))
    return out


def _case_job(job: Job, case: StdioCase) -> Job:
    """The program on one case, its output only collected: the expected answer stays in the
    parent (the checker reads it), so the comparison here is with nothing."""
    return replace(job, tests=StdioTests((StdioCase(case.stdin, ""),), _NO_OUTPUT))


def _ran_cleanly(result: ExecutionResult) -> bool:
    """The program ran to its end, so its output is the checker's to judge: PASSED or WRONG_ANSWER
    against the empty comparison, except a WRONG_ANSWER for tampering."""
    if result.verdict is Verdict.PASSED:
        return True
    return result.verdict is Verdict.WRONG_ANSWER and not result.message.startswith("tampering")


def _full_stdout(result: ExecutionResult) -> str:
    full = result.extra.get("stdout")
    return full if isinstance(full, str) else result.stdout


def _checker_job(job: Job, case: int, output: str, answer_as_output: bool = False) -> Job:
    assert isinstance(job.tests, StdioTests)
    cmp, test = job.tests.compare, job.tests.cases[case]
    files = (
        ("input.txt", test.stdin.encode()),
        ("output.txt", (test.stdout if answer_as_output else output).encode()),
        ("answer.txt", test.stdout.encode()),
    )
    return Job(
        program=checker_program(cmp),
        tests=StdioTests((StdioCase("", ""),), _NO_OUTPUT),
        language=cmp.checker_language,
        limits=CHECKER_LIMITS,
        files=files,
        id=f"{job.id}#checker{case}",
    )


def _status(result: ExecutionResult) -> int | None:
    """The checker's exit status, or None if it crashed (exception, signal, timeout, limits)."""
    if result.verdict in (Verdict.PASSED, Verdict.WRONG_ANSWER):
        return 0  # it exited normally; its stdout is not judged
    codes = result.extra.get("exit_codes")
    test = result.tests[0] if result.tests else None
    if result.verdict is not Verdict.RUNTIME_ERROR or test is None or not isinstance(codes, list):
        return None
    if test.exception not in (None, "SystemExit"):
        return None  # a Python checker's uncaught exception is a crash, not a verdict
    code = codes[0]
    return code if isinstance(code, int) and code >= 0 else None


def _check(
    run: Callable[[Sequence[Job]], list[ExecutionResult]], check_jobs: list[Job]
) -> list[TestOutcome]:
    """Each checker run's verdict (index = case placeholder 0), with the answer-as-output rerun
    for the checkers that failed."""
    results = run(check_jobs) if check_jobs else []
    failed = [i for i, r in enumerate(results) if _status(r) not in (_ACCEPTED, *_REJECTED)]
    reruns = [_answer_rerun(check_jobs[i]) for i in failed]
    again = dict(zip(failed, run(reruns) if reruns else [], strict=True))
    outcomes = []
    for i, r in enumerate(results):
        status = _status(r)
        if status == _ACCEPTED:
            outcomes.append(TestOutcome(0, Verdict.PASSED, wall_s=r.wall_s))
        elif status in _REJECTED:
            msg = f"the checker rejected the output (exit status {status}): {_said(r)}"
            outcomes.append(TestOutcome(0, Verdict.WRONG_ANSWER, message=msg))
        elif _status(again[i]) == _ACCEPTED:
            msg = f"the output made the checker fail ({_said(r)}); it accepts the answer"
            outcomes.append(TestOutcome(0, Verdict.WRONG_ANSWER, "CheckerCrash", msg))
        else:
            msg = f"the checker failed: {r.verdict.value} {_said(r)}"
            outcomes.append(TestOutcome(0, Verdict.SANDBOX_ERROR, "CheckerFailed", msg))
    return outcomes


def _answer_rerun(job: Job) -> Job:
    files = dict(job.files)
    files["output.txt"] = files["answer.txt"]
    return replace(job, files=tuple(files.items()))


def _said(result: ExecutionResult) -> str:
    text = (result.stderr or result.stdout or result.message).strip()
    return text[:300]


def _combine(
    job: Job, runs: Sequence[ExecutionResult], judged: list[TestOutcome | None]
) -> ExecutionResult:
    """One result for the job: each case's outcome (the checker's where the program ran
    cleanly, else the run's own), the first failure's verdict."""
    outcomes = []
    for case, (run, check) in enumerate(zip(runs, judged, strict=True)):
        if check is None:
            own = run.tests[0] if run.tests else TestOutcome(0, run.verdict, message=run.message)
            outcomes.append(replace(own, index=case))
        else:
            outcomes.append(replace(check, index=case, wall_s=run.wall_s))
    failure = next((o for o in outcomes if o.verdict is not Verdict.PASSED), None)
    verdict = failure.verdict if failure else Verdict.PASSED
    message = f"test {failure.index}: {failure.message}" if failure else ""
    last = runs[-1]
    return ExecutionResult(
        verdict=verdict,
        tests=tuple(outcomes),
        n_tests=len(job.tests),
        message=message,
        cpu_s=sum(r.cpu_s for r in runs),
        wall_s=sum(r.wall_s for r in runs),
        peak_memory_kb=max(r.peak_memory_kb for r in runs),
        stdout=last.stdout,
        stderr=last.stderr,
        attempts=max(r.attempts for r in runs),
        tampering=tuple(dict.fromkeys(t for r in runs for t in r.tampering)),
        sandbox_error_cause=(
            SandboxErrorCause.CHECKER_FAILED if verdict is Verdict.SANDBOX_ERROR else ""
        ),
        possible_hack=(
            "the program's output made the checker fail"
            if failure is not None and failure.exception == "CheckerCrash"
            else ""
        ),
    )
