"""`execrl sandbox serve` against hostile requests: any malformed body is a 4xx with a message,
never a 500; text a program chooses never breaks the answer; /health without the token says
only that the server is up. One server, with a token, as a subprocess on 127.0.0.1."""

from __future__ import annotations

import json

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from tests.sandbox.test_server import Server  # noqa: E402

from execrl.sandbox.service import wire  # noqa: E402

TOKEN = "hostile-s3cret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
STDIO = {"kind": "stdio", "cases": [{"stdin": "", "stdout": ""}]}


def _call(value_json: str) -> bytes:
    """A /v1/run body whose one call-test input is `value_json`, spliced in as raw JSON."""
    return (
        '{"code":"def f(x):\\n    return 1\\n","entry_point":"f",'
        '"tests":{"kind":"call","inputs":[[' + value_json + ']],"expected":[1]}}'
    ).encode()


MALFORMED = {
    "json-nested-100k-deep": ("/run_code", b"[" * 100_000 + b"]" * 100_000),
    "value-nested-900-deep": ("/v1/run", _call("[" * 900 + "]" * 900)),
    "tagged-value-nested-deep": ("/v1/run", _call('{"$t":[' * 400 + "1" + "]}" * 400)),
    "complex-tag-with-no-parts": ("/v1/run", _call('{"$c":[]}')),
    "tuple-tag-with-a-number": ("/v1/run", _call('{"$t":5}')),
    "dict-tag-with-bad-pairs": ("/v1/run", _call('{"$d":[[1]]}')),
    "number-of-5000-digits": ("/v1/run", _call("9" * 5000)),
    "lone-surrogate-in-code": (
        "/v1/run",
        b'{"code":"\\ud800","tests":' + json.dumps(STDIO).encode() + b"}",
    ),  # fmt: skip
    "lone-surrogate-file-name": (
        "/run_code",
        b'{"code":"print(1)","language":"python","files":{"\\udc80":"QQ=="}}',
    ),
    "lone-surrogate-stdin": (
        "/run_code",
        b'{"code":"print(1)","language":"python","stdin":"\\ud800"}',
    ),  # fmt: skip
    "lone-surrogate-unknown-field": ("/v1/run", b'{"code":"x","\\ud800":1}'),
    "tolerance-as-text": (
        "/v1/run",
        json.dumps(
            {
                "code": "x",
                "entry_point": "f",
                "tests": {
                    "kind": "call",
                    "inputs": [[1]],
                    "expected": [1],
                    "compare": {"atol": "x"},
                },
            }
        ).encode(),  # fmt: skip
    ),
    "batch-with-a-broken-value": (
        "/v1/run_batch",
        b'{"runs":[{"code":"x","entry_point":"f","tests":{"kind":"call","inputs":[[{"$c":[]}]],'
        b'"expected":[1]}}]}',
    ),
    "not-json-at-all": ("/v1/run", b"\xff\xfe\x00"),
}


@pytest.fixture(scope="module")
def server():
    s = Server("--workers", "1", "--max-retries", "0", env={"EXECRL_SANDBOX_TOKEN": TOKEN})
    yield s
    assert s.stop() == 0


def _post(server, path: str, body: bytes) -> httpx.Response:
    headers = {**AUTH, "content-type": "application/json"}
    return httpx.post(server.url + path, content=body, headers=headers, timeout=60)


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_a_malformed_body_is_a_4xx_with_a_message_never_a_500(server, name):
    path, body = MALFORMED[name]
    r = _post(server, path, body)
    assert 400 <= r.status_code < 500, (r.status_code, r.text[:300])
    assert r.json()["detail"]


def test_no_malformed_body_reaches_a_worker(server):
    for path, body in MALFORMED.values():
        _post(server, path, body)
    health = httpx.get(server.url + "/health", headers=AUTH, timeout=30).json()
    assert health["worker_restarts"] == 0  # a lone-surrogate file name killed the worker


def test_text_a_program_chooses_never_makes_the_answer_fail(server):
    raising = "def f(x):\n    raise ValueError('\\ud800 x')\n"
    run = {"code": raising, "entry_point": "f",
           "tests": {"kind": "call", "inputs": [[1]], "expected": [1]}}  # fmt: skip
    r = _post(server, "/v1/run", json.dumps(run).encode())
    assert r.status_code == 200, r.text[:300]
    assert r.json()["verdict"] == "RUNTIME_ERROR" and "\ud800" in r.json()["message"]
    code = {"code": "raise ValueError('\\ud800')", "language": "python"}
    r = _post(server, "/run_code", json.dumps(code).encode())
    assert r.status_code == 200 and r.json()["status"] == "Failed", r.text[:300]


def test_health_without_the_token_says_only_that_the_server_is_up(server):
    anonymous = httpx.get(server.url + "/health", timeout=30)
    assert anonymous.status_code == 200 and anonymous.json() == {"status": "ok"}
    wrong = httpx.get(server.url + "/health", headers={"Authorization": "Bearer no"}, timeout=30)
    assert wrong.json() == {"status": "ok"}
    full = httpx.get(server.url + "/health", headers=AUTH, timeout=30).json()
    assert full["worker_pids"] and full["worker_uids"] and full["layers"]
    for path in ("/openapi.json", "/docs"):  # no schema or page beside the token
        assert httpx.get(server.url + path, timeout=30).status_code == 404


def test_the_wire_decoder_refuses_deep_values_without_recursing():
    deep: object = 1
    for _ in range(100_000):  # deeper than any recursion limit; built, not parsed
        deep = [deep]
    for tests in (
        {"kind": "call", "inputs": [[deep]], "expected": [1]},
        {"kind": "call", "inputs": [[1]], "expected": [deep]},
    ):
        with pytest.raises(ValueError, match="nested deeper"):
            wire.tests_from_json(tests)
