"""The sql verifier: result sets compared in the parent; the query can only read."""

from __future__ import annotations

from execrl.sandbox import Verdict
from execrl.tasks.schema import VerifierTests
from verifiers.verifier_helpers import verify

SCHEMA = ["CREATE TABLE t (id INTEGER, name TEXT, x REAL)"]
ROWS = {"t": [[1, "a", 1.5], [2, "b", 2.5], [3, "c", 0.25]]}


def sql_tests(expected, ordered=False) -> VerifierTests:
    return VerifierTests(
        "sql", {"schema": SCHEMA, "rows": ROWS, "expected": expected, "ordered": ordered}
    )


def test_result_sets_compare_as_multisets_unless_the_reference_orders(sandbox):
    unordered = sql_tests([["a"], ["b"]])
    ordered = sql_tests([["b"], ["a"]], ordered=True)
    (asc, v1), (fenced, v2), (missing, v3) = verify(
        sandbox,
        unordered,
        "SELECT name FROM t WHERE x > 1 ORDER BY name",
        "```sql\nSELECT name FROM t WHERE x > 1\n```",
        "SELECT name FROM t WHERE x > 2",
    )
    assert asc.passed and v1.score == 1.0 and v1.components["matches"] == 1.0
    assert fenced.passed and v2.score == 1.0
    assert missing.verdict is Verdict.WRONG_ANSWER and v3.score == 0.0
    assert v3.components == {"runs": 1.0, "columns": 1.0, "rows": 0.0, "matches": 0.0}
    (right, _), (wrong_order, v5) = verify(
        sandbox,
        ordered,
        "SELECT name FROM t WHERE x > 1 ORDER BY x DESC",
        "SELECT name FROM t WHERE x > 1 ORDER BY x",
    )
    assert right.passed and not wrong_order.passed and v5.components["rows"] == 1.0
    assert "in the order asked for" in v5.feedback


def test_floats_compare_rounded_and_errors_are_runtime_errors(sandbox):
    (close, v1), (bad, v2) = verify(
        sandbox, sql_tests([[1.5 + 1e-9]]), "SELECT x FROM t WHERE id = 1", "SELEC x FROM t"
    )
    assert close.passed and v1.score == 1.0
    assert bad.verdict is Verdict.RUNTIME_ERROR and "syntax error" in v2.feedback
    assert v2.components == {"runs": 0.0}


def test_a_query_cannot_write_or_attach_another_file(sandbox):
    """Attacks on the database and the disk: each is refused by the runner's authorizer or
    the read-only connection, and none passes (the expected rows are those of table t)."""
    attacks = [
        "ATTACH DATABASE 'other.db' AS other",
        "ATTACH DATABASE '/tmp/run/db.sqlite' AS again",
        "DELETE FROM t RETURNING id, name, x",
        "INSERT INTO t VALUES (4, 'd', 1.0) RETURNING id, name, x",
        "CREATE TABLE evil AS SELECT * FROM t",
        "VACUUM INTO 'copy.db'",
        "PRAGMA writable_schema = 1",
        "SELECT load_extension('/tmp/evil.so')",
        "SELECT * FROM t; DROP TABLE t",
    ]
    expected = [list(r) for r in ROWS["t"]]
    for (r, v), query in zip(verify(sandbox, sql_tests(expected), *attacks), attacks, strict=True):
        assert not r.passed and v.score == 0.0, query
        refused = ("not authorized", "authorization denied", "one statement at a time", "readonly")
        assert any(word in v.feedback for word in refused), (query, v.feedback)


def test_a_runaway_query_times_out(sandbox):
    spec = {"schema": SCHEMA, "rows": ROWS, "expected": [[1]], "timeout_s": 0.5}
    loop = "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c) SELECT max(n) FROM c"
    ((r, v),) = verify(sandbox, VerifierTests("sql", spec), loop)
    assert r.verdict is Verdict.TIMEOUT and v.score == 0.0


def test_a_job_of_a_verifier_task_carries_the_tasks_language():
    """The scorer builds jobs with the task's language; for verifier tasks that names what the
    candidate is ("sql"), and the verifier picks each run's own language."""
    from execrl.sandbox import Job

    job = Job("SELECT 1", sql_tests([[1]]), language="sql", id="t")
    assert job.language == "sql"
