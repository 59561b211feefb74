"""`/metrics` counts each program once, by the verdict its client was told, on every endpoint:
a verifier's runs and a /run_code run are not wrong answers when they passed."""

from __future__ import annotations

import re

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from tests.sandbox.test_server import Server  # noqa: E402

SQL = {
    "schema": ["CREATE TABLE t (id INTEGER, name TEXT)"],
    "rows": {"t": [[1, "a"], [2, "b"]]},
    "expected": [["b"]],
    "ordered": False,
}


def _verdicts(text: str) -> dict[str, int]:
    return {
        v: int(n)
        for v, n in re.findall(r'^execrl_verdicts_total\{verdict="(\w+)"\} (\d+)$', text, re.M)
        if int(n)
    }


def test_metrics_count_every_endpoints_passes_as_passed():
    server = Server("--workers", "1", "--max-retries", "0")
    try:

        def post(path: str, body: dict) -> dict:
            reply = httpx.post(server.url + path, json=body, timeout=120)
            assert reply.status_code == 200, reply.text
            return reply.json()

        assert (
            post("/run_code", {"code": "print('hi')", "language": "python"})["status"] == "Success"
        )
        assert (
            post("/run_code", {"code": "raise SystemExit(3)", "language": "python"})["status"]
            == "Failed"
        )
        graded = {"code": "def f(x):\n    return x\n", "entry_point": "f",
                  "tests": {"kind": "call", "inputs": [[1]], "expected": [1]}}  # fmt: skip
        assert post("/v1/run", graded)["verdict"] == "PASSED"
        batch = post(
            "/v1/run_batch", {"runs": [graded, {**graded, "code": "def f(x):\n    return 0\n"}]}
        )
        assert [r["verdict"] for r in batch["results"]] == ["PASSED", "WRONG_ANSWER"]
        right = {"code": "SELECT name FROM t WHERE id = 2", "verifier": "sql", "spec": SQL}
        assert post("/v1/verify", right)["verdict"] == "PASSED"
        assert (
            post("/v1/verify", {**right, "code": "SELECT name FROM t"})["verdict"] == "WRONG_ANSWER"
        )
        text = httpx.get(server.url + "/metrics", timeout=30).text
    finally:
        assert server.stop() == 0
    assert _verdicts(text) == {"PASSED": 4, "WRONG_ANSWER": 2, "RUNTIME_ERROR": 1}
    assert int(re.search(r"^execrl_executions_total (\d+)$", text, re.M).group(1)) >= 7
