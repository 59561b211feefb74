"""Jobs and results as JSON, for the sandbox server and its clients.

Values of call tests (inputs and expected outputs) travel as `plain`'s tagged JSON, so tuples,
sets, bytes and non-finite floats survive the trip and compare as they would in-process. The
expected values go to the server (which grades, in its trusted parent) and never further.
"""

from __future__ import annotations

import base64
import dataclasses
from typing import Any

from execrl.sandbox import plain
from execrl.sandbox.job import Job
from execrl.sandbox.limits import Limits
from execrl.sandbox.verdict import ExecutionResult, TestOutcome, Verdict
from execrl.tasks.schema import AssertTests, CallTests, Compare, StdioCase, StdioTests, Tests


def tests_to_json(tests: Tests) -> dict[str, Any]:
    if isinstance(tests, AssertTests):
        return {"kind": "assert", "setup": tests.setup, "statements": list(tests.statements)}
    if isinstance(tests, CallTests):
        return {
            "kind": "call",
            "inputs": [[plain.to_json(a) for a in args] for args in tests.inputs],
            "expected": [plain.to_json(e) for e in tests.expected],
            "compare": dataclasses.asdict(tests.compare),
        }
    return {
        "kind": "stdio",
        "cases": [{"stdin": c.stdin, "stdout": c.stdout} for c in tests.cases],
        "compare": dataclasses.asdict(tests.compare),
    }


def tests_from_json(data: dict[str, Any]) -> Tests:
    """Raises ValueError (with the field named) on a malformed description."""
    kind = data.get("kind")
    compare = Compare(**(data.get("compare") or {}))
    if kind == "assert":
        return AssertTests(data.get("setup") or "", tuple(data.get("statements") or ()))
    if kind == "call":
        try:
            inputs = tuple(tuple(plain._dec(a) for a in args) for args in data.get("inputs") or ())
            expected = tuple(plain._dec(e) for e in data.get("expected") or ())
        except (ValueError, TypeError, KeyError) as exc:
            raise ValueError(f"tests.inputs/expected: not plain tagged JSON: {exc}") from None
        return CallTests(inputs, expected, compare)
    if kind == "stdio":
        cases = tuple(StdioCase(c["stdin"], c["stdout"]) for c in data.get("cases") or ())
        return StdioTests(cases, compare)
    raise ValueError(f"tests.kind must be 'assert', 'call' or 'stdio', not {kind!r}")


def job_to_json(job: Job) -> dict[str, Any]:
    out: dict[str, Any] = {
        "code": job.program,
        "language": job.language,
        "tests": tests_to_json(job.tests),
        "limits": job.limits.to_wire(),
    }
    if job.entry_point:
        out["entry_point"] = job.entry_point
    if not job.strict_returns:
        out["strict_returns"] = False
    if job.allow_threads:
        out["allow_threads"] = True
    if job.id:
        out["id"] = job.id
    if job.files:
        out["files"] = {p: base64.b64encode(d).decode() for p, d in job.files}
    if job.fetch_files:
        out["fetch_files"] = list(job.fetch_files)
    return out


def limits_from_json(data: dict[str, Any] | None) -> Limits:
    fields = {f.name for f in dataclasses.fields(Limits)}
    unknown = sorted(set(data or {}) - fields)
    if unknown:
        raise ValueError(f"limits: unknown field(s) {unknown}; known: {sorted(fields)}")
    return Limits(**(data or {}))


def result_to_json(r: ExecutionResult) -> dict[str, Any]:
    extra = dict(r.extra)
    if isinstance(extra.get("files"), dict):
        extra["files"] = {
            p: base64.b64encode(d).decode() if d is not None else None
            for p, d in extra["files"].items()
        }
    return {
        "verdict": r.verdict.value,
        "passed": r.passed,
        "n_tests": r.n_tests,
        "n_passed": r.n_passed,
        "pass_rate": r.pass_rate,
        "message": r.message,
        "line": r.line,
        "tests": [dataclasses.asdict(t) | {"verdict": t.verdict.value} for t in r.tests],
        "cpu_s": r.cpu_s,
        "wall_s": r.wall_s,
        "peak_memory_kb": r.peak_memory_kb,
        "stdout": r.stdout,
        "stderr": r.stderr,
        "attempts": r.attempts,
        "tampering": list(r.tampering),
        "sandbox_error_cause": r.sandbox_error_cause,
        "possible_hack": r.possible_hack,
        "extra": extra,
    }


def result_from_json(d: dict[str, Any]) -> ExecutionResult:
    extra = dict(d.get("extra") or {})
    if isinstance(extra.get("files"), dict):
        extra["files"] = {
            p: base64.b64decode(v) if v is not None else None for p, v in extra["files"].items()
        }
    tests = tuple(
        TestOutcome(
            t["index"],
            Verdict(t["verdict"]),
            t.get("exception"),
            t.get("message", ""),
            t.get("line"),
            t.get("wall_s"),
        )
        for t in d.get("tests", ())
    )
    return ExecutionResult(
        verdict=Verdict(d["verdict"]),
        tests=tests,
        n_tests=d.get("n_tests", 0),
        message=d.get("message", ""),
        line=d.get("line"),
        cpu_s=d.get("cpu_s", 0.0),
        wall_s=d.get("wall_s", 0.0),
        peak_memory_kb=d.get("peak_memory_kb", 0),
        stdout=d.get("stdout", ""),
        stderr=d.get("stderr", ""),
        attempts=d.get("attempts", 1),
        tampering=tuple(d.get("tampering", ())),
        sandbox_error_cause=str(d.get("sandbox_error_cause") or ""),
        possible_hack=str(d.get("possible_hack") or ""),
        extra=extra,
    )
