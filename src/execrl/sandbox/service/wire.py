"""Jobs and results as JSON, for the sandbox server and its clients.

Values of call tests (inputs and expected outputs) travel as tagged JSON (`execrl.tasks.values`,
within the sandbox's limits), so tuples, sets, bytes and non-finite floats survive the trip and compare as they would in-process. The
expected values go to the server (which grades, in its trusted parent) and never further.
"""

from __future__ import annotations

import base64
import dataclasses
import math
from typing import Any

from execrl.sandbox.grading.job import Job
from execrl.sandbox.grading.limits import Limits
from execrl.sandbox.grading.verdict import ExecutionResult, TestOutcome, Verdict
from execrl.tasks import values
from execrl.tasks.schema import AssertTests, CallTests, Compare, StdioCase, StdioTests, Tests


def tests_to_json(tests: Tests) -> dict[str, Any]:
    if isinstance(tests, AssertTests):
        return {"kind": "assert", "setup": tests.setup, "statements": list(tests.statements)}
    if isinstance(tests, CallTests):
        return {
            "kind": "call",
            "inputs": [[values.to_json(a, values.SANDBOX) for a in args] for args in tests.inputs],
            "expected": [values.to_json(e, values.SANDBOX) for e in tests.expected],
            "compare": dataclasses.asdict(tests.compare),
        }
    return {
        "kind": "stdio",
        "cases": [{"stdin": c.stdin, "stdout": c.stdout} for c in tests.cases],
        "compare": dataclasses.asdict(tests.compare),
    }


# Tagged JSON spends up to three levels per level of value (a dict: tag, body, pair), and
# the sandbox refuses values nested deeper than MAX_DEPTH, so nothing deeper can ever be compared;
# the bound keeps the recursive decoder far from Python's recursion limit.
MAX_JSON_DEPTH = 3 * values.MAX_DEPTH + 8


def tests_from_json(data: dict[str, Any]) -> Tests:
    """Raises ValueError (with the field named) on a malformed description."""
    kind = data.get("kind")
    compare = compare_from_json(data.get("compare") or {})
    if kind == "assert":
        return AssertTests(data.get("setup") or "", tuple(data.get("statements") or ()))
    if kind == "call":
        inputs = tuple(
            tuple(_value(a, f"tests.inputs.{n}.{i}") for i, a in enumerate(args))
            for n, args in enumerate(data.get("inputs") or ())
        )
        expected = tuple(
            _value(e, f"tests.expected.{n}") for n, e in enumerate(data.get("expected") or ())
        )
        return CallTests(inputs, expected, compare)
    if kind == "stdio":
        cases = tuple(StdioCase(c["stdin"], c["stdout"]) for c in data.get("cases") or ())
        return StdioTests(cases, compare)
    raise ValueError(f"tests.kind must be 'assert', 'call' or 'stdio', not {kind!r}")


def compare_from_json(data: Any) -> Compare:
    """`Compare` from its JSON fields, each checked for its type (a string tolerance would
    otherwise reach the comparison, which would then fail every answer without saying why)."""
    if not isinstance(data, dict):
        raise ValueError(f"tests.compare: an object of fields, not {type(data).__name__}")
    fields = {f.name: f.default for f in dataclasses.fields(Compare)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ValueError(f"tests.compare: unknown field(s) {unknown}; known: {sorted(fields)}")
    for name, value in data.items():
        kind = type(fields[name])
        if kind is float:
            ok = type(value) in (int, float) and math.isfinite(value) and value >= 0
        elif kind in (bool, str, int):
            ok = type(value) is kind
        else:  # a field of another kind: Compare itself checks it
            ok = True
        if not ok:
            want = "a finite number >= 0" if kind is float else f"a {kind.__name__}"
            raise ValueError(f"tests.compare.{name}: {value!r} must be {want}")
    return Compare(**data)


def _value(data: Any, where: str) -> Any:
    """One value of a call test from tagged JSON; ValueError naming `where` for anything else."""
    depth = _json_depth(data)
    if depth > MAX_JSON_DEPTH:
        raise ValueError(f"{where}: nested deeper than {MAX_JSON_DEPTH} levels of JSON")
    try:
        return values.from_json(data)
    except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
        raise ValueError(f"{where}: not plain tagged JSON: {exc}") from None


def _json_depth(data: Any) -> int:
    """The nesting depth of parsed JSON, found without recursion (a hostile body is deep)."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth > MAX_JSON_DEPTH:
            break
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)
    return deepest


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
    if job.stop_at_first_failure:
        out["stop_at_first_failure"] = True
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
