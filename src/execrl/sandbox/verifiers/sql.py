"""`sql`: a candidate query against a SQLite database built in the run's scratch directory.

In the sandbox a fixed runner builds `db.sqlite` from the task's schema and rows, reopens it
read-only with an authorizer that allows reading and nothing else (no ATTACH, no writes, no
PRAGMA, no extension loading), runs the one statement the candidate wrote under a time budget,
and prints the result set. The expected rows stay in the parent, which compares result sets as
Spider's execution accuracy does: as multisets of rows, in order only when the reference query
orders them (`spec.ordered`). Floats are compared rounded to `FLOAT_DIGITS` decimals; a
non-finite value matches only the same non-finite value.

spec: `schema` (CREATE statements), `rows` ({table: [[value, ...], ...]}), `expected`
([[value, ...], ...]), `ordered` (bool), optional `timeout_s` (default 2).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from execrl.sandbox.grading.artifacts import program_job, program_run
from execrl.sandbox.grading.job import Job
from execrl.sandbox.grading.verdict import ExecutionResult, Verdict
from execrl.sandbox.verifiers.base import Verification, VerifyRequest, failed, strip_fence

FLOAT_DIGITS = 6
MAX_ROWS = 10_000  # rows a query may return; more is a wrong answer, never a hang
MARK = "@execrl-sql "

RUNNER = r"""
import json, sqlite3, time

MAX_ROWS = __MAX_ROWS__
spec = json.load(open("db.json", encoding="utf-8"))
query = open("query.sql", encoding="utf-8").read()
build = sqlite3.connect("db.sqlite")
for statement in spec["schema"]:
    build.execute(statement)
for table, rows in spec["rows"].items():
    if rows:
        marks = ",".join("?" * len(rows[0]))
        build.executemany(f'INSERT INTO "{table}" VALUES ({marks})', rows)
build.commit()
build.close()

ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, getattr(sqlite3, "SQLITE_RECURSIVE", 33)}


def authorize(action, arg1, arg2, db, trigger):
    if action == sqlite3.SQLITE_FUNCTION:
        return sqlite3.SQLITE_DENY if (arg2 or "").lower() == "load_extension" else sqlite3.SQLITE_OK
    return sqlite3.SQLITE_OK if action in ALLOWED else sqlite3.SQLITE_DENY


def cell(value):
    return {"bytes": value.hex()} if isinstance(value, bytes) else value


conn = sqlite3.connect("file:db.sqlite?mode=ro", uri=True)
conn.set_authorizer(authorize)
deadline = time.monotonic() + float(spec.get("timeout_s", 2.0))
conn.set_progress_handler(lambda: time.monotonic() > deadline, 1000)
try:
    cursor = conn.execute(query)
    columns = [d[0] for d in cursor.description or ()]
    rows = cursor.fetchmany(MAX_ROWS + 1)
    out = {"status": "ok", "columns": columns, "rows": [[cell(v) for v in r] for r in rows]}
    if len(rows) > MAX_ROWS:
        out = {"status": "too_many_rows"}
except sqlite3.Error as exc:
    timed_out = time.monotonic() > deadline
    out = {"status": "timeout" if timed_out else "error", "error": f"{type(exc).__name__}: {exc}"}
except (ValueError, MemoryError) as exc:
    out = {"status": "error", "error": f"{type(exc).__name__}: {exc}"}
print("__MARK__" + json.dumps(out))
""".replace("__MAX_ROWS__", str(MAX_ROWS)).replace("__MARK__", MARK)


class SqlVerifier:
    name = "sql"
    components = ("runs", "columns", "rows", "matches")

    def jobs(self, request: VerifyRequest) -> Sequence[Job]:
        schema = request.field("schema", list)
        rows = request.field("rows", dict)
        request.field("expected", list)
        data = {"schema": schema, "rows": rows, "timeout_s": request.spec.get("timeout_s", 2.0)}
        files = (
            ("db.json", json.dumps(data).encode()),
            ("query.sql", strip_fence(request.program).encode()),
        )
        return [program_job(RUNNER, files=files, limits=request.limits, job_id=request.task_id)]

    def verify(self, request: VerifyRequest, runs: Sequence[ExecutionResult]) -> Verification:
        run = program_run(runs[0])
        if not run.ran:
            return failed(run.verdict, f"the query runner failed: {run.message}", runs=0.0)
        line = next((ln for ln in run.stdout.splitlines() if ln.startswith(MARK)), None)
        if line is None:
            return failed(Verdict.RUNTIME_ERROR, "the query produced no result", runs=0.0)
        out = json.loads(line[len(MARK) :])
        status = out.get("status")
        if status == "timeout":
            return failed(Verdict.TIMEOUT, f"the query ran out of time: {out.get('error')}")
        if status == "too_many_rows":
            return failed(Verdict.WRONG_ANSWER, f"the query returned over {MAX_ROWS} rows")
        if status != "ok":
            return failed(Verdict.RUNTIME_ERROR, f"the query failed: {out.get('error')}", runs=0.0)
        got = [tuple(_norm(v) for v in row) for row in out["rows"]]
        want = [tuple(_norm(v) for v in row) for row in request.spec["expected"]]
        ordered = bool(request.spec.get("ordered", False))
        same = got == want if ordered else Counter(got) == Counter(want)
        width = len(out["columns"])
        components = {
            "runs": 1.0,
            "columns": float(not want or width == len(want[0])),
            "rows": float(len(got) == len(want)),
            "matches": float(same),
        }
        if same:
            return Verification(1.0, components, Verdict.PASSED, "the result set is correct")
        order = " (in the order asked for)" if ordered else ""
        return Verification(
            0.0,
            components,
            Verdict.WRONG_ANSWER,
            f"the query ran and returned {len(got)} row(s) of {width} column(s), but not the "
            f"result the question asks for{order}",
        )


def _norm(value: Any) -> Any:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float):
        if math.isnan(value):  # NaN != NaN: one marker, so NaN matches NaN and nothing else
            return ("nan",)
        return round(value, FLOAT_DIGITS) + 0.0  # -0.0 and 0.0 alike
    if isinstance(value, dict):
        return ("bytes", str(value.get("bytes")))
    return value
