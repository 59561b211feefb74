"""Verdicts, decided in the trusted parent from what the worker observed.

A run passes only if the harness said, through its sealed channel (`protocol.seal`), that every test
ran and passed, the process exited normally, and no limit was hit. Exit codes, stdout and
exceptions the candidate raises never mean pass on their own.
"""

from __future__ import annotations

import base64
import signal
from typing import Any

from execrl.sandbox.grading.compare import describe, stdout_matches, values_equal
from execrl.sandbox.grading.job import Job
from execrl.sandbox.grading.verdict import ExecutionResult, SandboxErrorCause, TestOutcome, Verdict
from execrl.sandbox.run.harness import CHANNEL_REPLACED
from execrl.tasks import values
from execrl.tasks.schema import CallTests, StdioTests

# ExecutionResult.extra key: stdin/stdout cases left unrun because an earlier one failed and the
# job asked to stop there (`Job.stop_at_first_failure`); absent when every case ran.
SKIPPED = "skipped_after_failure"
CHANNEL_CAP_MB = 256  # watch.CHANNEL_CAP, which the worker keeps to its own small imports

_CLS = {
    "wrong": Verdict.WRONG_ANSWER,
    "memory": Verdict.MEMORY_LIMIT,
    "error": Verdict.RUNTIME_ERROR,
}
_CPU_SIGNALS = {signal.SIGXCPU}


def grade(job: Job, raws: list[dict[str, Any]], attempts: int = 1) -> ExecutionResult:
    if isinstance(job.tests, StdioTests):
        outcomes = [_grade_stdio_case(job, i, raw) for i, raw in enumerate(raws)]
        run_verdict, message = _first_failure(outcomes, len(job.tests))
        raw = raws[-1] if raws else {}
        line = next(
            (o.line for o in outcomes if o.verdict is run_verdict and o.line is not None), None
        )
        extra = _stdio_extra(raws)
        if job.stop_at_first_failure and len(raws) < len(job.tests):
            # The worker stopped after a failing case (`worker._failed`), asked to.
            extra[SKIPPED] = len(job.tests) - len(raws)
    else:
        raw = raws[0]
        run_verdict, message, outcomes = _grade_function_run(job, raw)
        line = _run_level_line(raw)
        extra = {}
    tampering = _tampering(raws)
    broken = next((t for t in tampering if _breaks_grading(t)), None)
    if run_verdict is Verdict.PASSED and broken is not None:
        # The tests ran on a world the program had bent (the restore put it back, but maybe
        # not before a test used it), or someone but the harness wrote on its channel.
        run_verdict, message = Verdict.WRONG_ANSWER, f"tampering: {broken}"
    return ExecutionResult(
        verdict=run_verdict,
        tests=tuple(outcomes),
        n_tests=len(job.tests),
        message=message,
        cpu_s=sum(r.get("cpu_s", 0.0) for r in raws),
        wall_s=sum(r.get("wall_s", 0.0) for r in raws),
        peak_memory_kb=max(
            (max(r.get("maxrss_kb", 0), r.get("cgroup_peak_kb", 0)) for r in raws), default=0
        ),
        stdout=raw.get("stdout", ""),
        stderr=raw.get("stderr", ""),
        attempts=attempts,
        tampering=tampering,
        line=line,
        extra=extra,
        # The worker reports SANDBOX_ERROR only when it could not prepare a run.
        sandbox_error_cause=(
            SandboxErrorCause.SETUP_FAILED if run_verdict is Verdict.SANDBOX_ERROR else ""
        ),
    )


def _run_level_line(raw: dict[str, Any]) -> int | None:
    """The candidate line of a failure before any test ran (a syntax error, a crash on load)."""
    for e in raw.get("events", ()):
        if e.get("t") in ("syntax", "load_error") and e.get("where") != "tests":
            line = e.get("line")
            return line if isinstance(line, int) else None
    return None


def _tampering(raws: list[dict[str, Any]]) -> tuple[str, ...]:
    seen: list[str] = []
    for raw in raws:
        for e in raw.get("events", ()):
            if e.get("t") == "denied":
                seen.append(str(e.get("event")))
        if raw.get("forged"):
            seen.append(f"{raw['forged']} forged harness message(s)")
    return tuple(dict.fromkeys(seen))


def _breaks_grading(tampering: str) -> bool:
    """What no honest program does: forge harness messages, or change the modules, classes,
    builtins or import system the tests use (what `guard`'s restore found and undid). Denied
    audit events are not in this class: the standard library tries some and falls back."""
    return tampering.endswith("forged harness message(s)") or tampering.startswith(
        ("modified ", "replaced ")
    )


def _limit_verdict(job: Job, raw: dict[str, Any]) -> tuple[Verdict, str] | None:
    """Verdicts the worker saw from outside the child; these override anything it said."""
    if any(e.get("t") == "setup_error" for e in raw.get("events", ())):
        msg = next(e.get("msg", "") for e in raw["events"] if e.get("t") == "setup_error")
        return Verdict.SANDBOX_ERROR, f"sandbox setup failed: {msg}"
    if raw.get("scratch_left"):
        # Only what the run itself made there can resist removal (`scratch.remove_tree`).
        return (
            Verdict.RUNTIME_ERROR,
            "the program left files in its scratch directory that could not be removed",
        )
    if raw.get("oom_killed"):
        return (
            Verdict.MEMORY_LIMIT,
            f"the run's processes together went over its memory limit ({job.limits.memory_mb} "
            "MiB beside the interpreter)",
        )
    if raw.get("timed_out") == "test":
        return Verdict.TIMEOUT, f"per-test wall-clock limit of {job.limits.test_wall_s:g}s exceeded"
    if raw.get("timed_out"):
        return Verdict.TIMEOUT, f"wall-clock limit of {job.limits.wall_s:g}s exceeded"
    if raw.get("output_limit") == "channel":
        return Verdict.OUTPUT_LIMIT, f"returned values over the {CHANNEL_CAP_MB} MiB limit of a run"
    if raw.get("output_limit"):
        stream = raw["output_limit"] if isinstance(raw["output_limit"], str) else "output"
        return Verdict.OUTPUT_LIMIT, f"{stream} over the {job.limits.output_bytes}-byte limit"
    sig = raw.get("signal")
    if sig is not None:
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        if sig in _CPU_SIGNALS or (
            sig == signal.SIGKILL and raw.get("cpu_s", 0) >= _cpu_limit(job) - 0.05
        ):
            return Verdict.TIMEOUT, f"CPU-time limit of {_cpu_limit(job):g}s exceeded ({name})"
        if sig == signal.SIGKILL and raw.get(
            "maxrss_kb", 0
        ) * 1024 >= 0.9 * job.limits.memory_mb * (1 << 20):
            return Verdict.MEMORY_LIMIT, "killed at the memory limit"
        return Verdict.RUNTIME_ERROR, f"killed by signal {name}"
    return None


def _cpu_limit(job: Job) -> float:
    return job.limits.cpu_s if job.limits.cpu_s is not None else job.limits.wall_s + 1


def _grade_function_run(job: Job, raw: dict[str, Any]) -> tuple[Verdict, str, list[TestOutcome]]:
    events = raw.get("events", [])
    results: dict[int, dict[str, Any]] = {}
    started: list[int] = []
    for e in events:
        t = e.get("t")
        if t == "syntax":
            return Verdict.SYNTAX_ERROR, f"line {e.get('line')}: {e.get('msg', '')}", []
        if t in ("start", "result") and type(e.get("i")) is not int:
            continue  # not the harness's (it can only have been forged): counted as tampering
        if t == "start":
            started.append(e["i"])
        elif t == "result" and e.get("i") not in results:
            results[e["i"]] = e
    outcomes = [
        _function_outcome(job, i, results[i]) for i in sorted(results) if 0 <= i < len(job.tests)
    ]
    limit = _limit_verdict(job, raw)
    if limit is not None:
        verdict, message = limit
        running = [i for i in started if i not in results]
        if running and verdict is not Verdict.SANDBOX_ERROR:
            outcomes.append(TestOutcome(running[-1], verdict, message=message))
        return verdict, message, outcomes
    load_error = next((e for e in events if e.get("t") == "load_error"), None)
    if load_error is not None:
        verdict = _CLS.get(load_error.get("cls"), Verdict.RUNTIME_ERROR)
        if verdict is Verdict.WRONG_ANSWER:  # an assert at module level is a crash, not an answer
            verdict = Verdict.RUNTIME_ERROR
        where = (
            "the tests failed to load"
            if load_error.get("where") == "tests"
            else "the program raised"
        )
        message = f"{where} {load_error.get('exc')}: {load_error.get('msg', '')}".rstrip(": ")
        return verdict, message, outcomes
    done = [e for e in events if e.get("t") == "done"]
    if not done or done[0].get("n") != len(job.tests) or raw.get("exit_code") != 0:
        status = raw.get("exit_code")
        if status == CHANNEL_REPLACED and not done:
            message = "the program replaced the harness's channel (fd 3); the run was stopped"
            return Verdict.RUNTIME_ERROR, message, outcomes
        return (
            Verdict.RUNTIME_ERROR,
            f"the program ended the run before the tests finished (exit status {status})",
            outcomes,
        )
    verdict, message = _first_failure(outcomes, len(job.tests))
    return verdict, message, outcomes


def _function_outcome(job: Job, i: int, e: dict[str, Any]) -> TestOutcome:
    wall = e.get("wall")
    if not e.get("ok"):
        return TestOutcome(
            i,
            _CLS.get(e.get("cls"), Verdict.RUNTIME_ERROR),
            e.get("exc"),
            e.get("msg", ""),
            e.get("line"),
            wall,
        )
    if isinstance(job.tests, CallTests):
        try:
            got = values.loads(e["value"])
        except Exception:  # noqa: BLE001 - never the harness's message: fail, never crash
            return TestOutcome(i, Verdict.RUNTIME_ERROR, None, "malformed result message")
        expected = job.tests.expected[i]
        if not values_equal(got, expected, job.tests.compare):
            return TestOutcome(
                i,
                Verdict.WRONG_ANSWER,
                None,
                f"expected {_short(expected)}, got {_short(got)}",
                None,
                wall,
            )
    return TestOutcome(i, Verdict.PASSED, wall_s=wall)


def _stdio_extra(raws: list[dict[str, Any]]) -> dict[str, object]:
    """What a caller of a plain run needs beyond the verdict (SandboxFusion's `run_code`): each
    case's exit status, the compile step, fetched files, and stdout past the kept 64 KiB."""
    extra: dict[str, object] = {"exit_codes": [_exit_status(r) for r in raws]}
    compiled = next((r["compile"] for r in raws if r.get("compile")), None)
    if compiled is not None:
        extra["compile"] = compiled
    last = raws[-1] if raws else {}
    if "files" in last:
        extra["files"] = {
            p: base64.b64decode(d) if d is not None else None for p, d in last["files"].items()
        }
    if len(last.get("stdout_full", "")) > len(last.get("stdout", "")):
        extra["stdout"] = last["stdout_full"]
    return extra


def _exit_status(raw: dict[str, Any]) -> int | None:
    """The program's own exit status: the harness's report for Python (the child itself always
    exits 0 there), the process's for other languages; -N for signal N; None after a timeout."""
    if raw.get("timed_out") or (raw.get("compile") and not raw["compile"].get("ok")):
        return None
    result = next((e for e in raw.get("events", ()) if e.get("t") == "result"), None)
    if result is not None:
        return int(result["status"]) if "status" in result else 1
    if raw.get("signal") is not None:
        return -int(raw["signal"])
    return raw.get("exit_code")


def _compile_failure(job: Job, i: int, compiled: dict[str, Any]) -> TestOutcome:
    if compiled.get("setup_error"):
        return TestOutcome(
            i, Verdict.SANDBOX_ERROR, message=f"sandbox setup failed: {compiled['setup_error']}"
        )
    if compiled.get("timed_out"):
        return TestOutcome(
            i,
            Verdict.TIMEOUT,
            message=f"compile time limit of {job.limits.compile_wall_s:g}s exceeded",
        )
    if compiled.get("output_limit"):
        return TestOutcome(i, Verdict.OUTPUT_LIMIT, message="compiler output over the limit")
    text = (compiled.get("stderr") or compiled.get("stdout") or "").strip()
    return TestOutcome(i, Verdict.SYNTAX_ERROR, "CompileError", text[:2000] or "compilation failed")


def _grade_stdio_case(job: Job, i: int, raw: dict[str, Any]) -> TestOutcome:
    compiled = raw.get("compile")
    if compiled is not None and not compiled.get("ok"):
        return _compile_failure(job, i, compiled)
    events = raw.get("events", [])
    syntax = next((e for e in events if e.get("t") == "syntax"), None)
    if syntax is not None:
        return TestOutcome(
            i, Verdict.SYNTAX_ERROR, "SyntaxError", syntax.get("msg", ""), syntax.get("line")
        )
    limit = _limit_verdict(job, raw)
    if limit is not None:
        return TestOutcome(i, limit[0], message=limit[1])
    result = next((e for e in events if e.get("t") == "result"), None)
    if result is not None and not result.get("ok"):
        if "status" in result:
            return TestOutcome(
                i, Verdict.RUNTIME_ERROR, "SystemExit", f"exit status {result['status']}"
            )
        verdict = _CLS.get(result.get("cls"), Verdict.RUNTIME_ERROR)
        if verdict is Verdict.WRONG_ANSWER:
            verdict = Verdict.RUNTIME_ERROR
        return TestOutcome(i, verdict, result.get("exc"), result.get("msg", ""), result.get("line"))
    if raw.get("exit_code") != 0:
        return TestOutcome(i, Verdict.RUNTIME_ERROR, None, f"exit status {raw.get('exit_code')}")
    assert isinstance(job.tests, StdioTests)
    expected = job.tests.cases[i].stdout
    got = raw.get("stdout_full", "")
    if not stdout_matches(got, expected, job.tests.compare):
        return TestOutcome(
            i, Verdict.WRONG_ANSWER, None, f"expected {_short(expected)}, got {_short(got)}"
        )
    return TestOutcome(i, Verdict.PASSED, wall_s=raw.get("wall_s"))


def _first_failure(outcomes: list[TestOutcome], n_tests: int) -> tuple[Verdict, str]:
    for o in outcomes:
        if o.verdict is not Verdict.PASSED:
            detail = f"{o.exception}: {o.message}" if o.exception else o.message
            return o.verdict, f"test {o.index}: {detail}".rstrip(": ")
    if len(outcomes) != n_tests or sorted(o.index for o in outcomes) != list(range(n_tests)):
        return Verdict.RUNTIME_ERROR, f"only {len(outcomes)} of {n_tests} tests reported"
    return Verdict.PASSED, ""


def _short(value: Any, n: int = 200) -> str:
    return describe(value, n)  # repr raises on ints past 4,300 digits; describe never does
