"""`execrl sandbox serve` carries verifier tasks: `POST /v1/verify` runs the named verifier and
answers its score, components, verdict, feedback and artifacts; `/v1/run` on a suite task graded
by a verifier is verified the same way. One server, as a subprocess on 127.0.0.1."""

from __future__ import annotations

import base64

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from tests.sandbox.test_server import Server  # noqa: E402

from execrl.tasks.catalog.registry import load_benchmark  # noqa: E402

SQL = {
    "schema": ["CREATE TABLE t (id INTEGER, name TEXT)"],
    "rows": {"t": [[1, "a"], [2, "b"], [3, "c"]]},
    "expected": [["b"], ["c"]],
    "ordered": False,
}
SUITE = "sql:n=1,difficulty=1"


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    return tmp_path_factory.mktemp("probe") / "imported"


@pytest.fixture(scope="module")
def server(probe, data_dir):
    env = {"EXECRL_IMPORT_PROBE": str(probe), "EXECRL_DATA_DIR": str(data_dir)}  # MBPP's tasks
    s = Server("--workers", "2", "--max-retries", "0", env=env)
    yield s
    assert s.stop() == 0


def _post(server, path: str, body: dict) -> httpx.Response:
    return httpx.post(server.url + path, json=body, timeout=120)


def test_verify_runs_the_named_verifier_and_answers_its_judgement(server):
    right = _post(server, "/v1/verify", {"code": "SELECT name FROM t WHERE id > 1", "verifier": "sql", "spec": SQL})  # fmt: skip
    wrong = _post(server, "/v1/verify", {"code": "SELECT name FROM t", "verifier": "sql", "spec": SQL})  # fmt: skip
    assert right.status_code == wrong.status_code == 200, (right.text, wrong.text)
    r, w = right.json(), wrong.json()
    assert r["verdict"] == "PASSED" and r["passed"] is True
    assert r["verification"]["score"] == 1.0 and r["verification"]["verdict"] == "PASSED"
    assert r["verification"]["components"] == {"runs": 1.0, "columns": 1.0, "rows": 1.0, "matches": 1.0}  # fmt: skip
    assert w["verdict"] == "WRONG_ANSWER" and w["verification"]["score"] == 0.0
    assert w["verification"]["components"]["runs"] == 1.0
    assert w["verification"]["feedback"] and w["message"] == w["verification"]["feedback"]
    # The expected rows stay in the server: the feedback says what is wrong, not what is right.
    assert "'b'" not in w["verification"]["feedback"]


def test_a_suite_task_is_verified_by_reference_on_both_routes(server):
    (task,) = load_benchmark(SUITE)
    ref = {"benchmark": SUITE, "id": task.id}
    verified = _post(server, "/v1/verify", {"code": task.reference, "task": ref})
    graded = _post(server, "/v1/run", {"code": task.reference, "task": ref})
    wrong = _post(server, "/v1/run", {"code": task.tests.wrong, "task": ref})
    assert verified.status_code == graded.status_code == wrong.status_code == 200, graded.text
    assert verified.json()["verification"]["score"] == 1.0
    assert graded.json()["verdict"] == "PASSED" and graded.json()["verification"]["score"] == 1.0
    assert wrong.json()["verdict"] == "WRONG_ANSWER"
    batch = httpx.post(server.url + "/v1/run_batch", json={"runs": [
        {"code": task.reference, "task": ref},
        {"code": "def f(x):\n    return x\n", "entry_point": "f",
         "tests": {"kind": "assert", "statements": ["assert f(1) == 1"]}},
    ]}, timeout=120)  # fmt: skip
    assert batch.status_code == 200, batch.text
    first, second = batch.json()["results"]
    assert first["verification"]["score"] == 1.0 and second["verdict"] == "PASSED"
    assert "verification" not in second  # a unit-test run's answer is as it always was


def test_a_chart_comes_back_with_its_rendered_image(server):
    program = "import matplotlib.pyplot as plt\nplt.bar(['a', 'b'], [2, 1])\nplt.title('T')\n"
    body = {"code": program, "verifier": "chart", "spec": {"reference": program}, "limits": {"wall_s": 60}}  # fmt: skip
    reply = _post(server, "/v1/verify", body)
    assert reply.status_code == 200, reply.text
    found = reply.json()["verification"]
    assert found["score"] == 1.0
    images = {a["path"]: base64.b64decode(a["data"]) for a in found["artifacts"]}
    assert set(images) == {"chart.png", "reference.png"}
    assert all(data.startswith(b"\x89PNG") for data in images.values())


def test_a_request_cannot_make_the_server_import_a_module(server, probe):
    """A verifier is code the server runs in its trusted process; naming "package.module:Class"
    would let a client import any module on the server's path (its import runs code)."""
    reply = _post(server, "/v1/verify", {"code": "x", "verifier": "import_probe:Probe", "spec": {}})
    dotted = _post(server, "/v1/verify", {"code": "x", "verifier": "tests.verifiers.import_probe:Probe", "spec": {}})  # fmt: skip
    assert reply.status_code == dotted.status_code == 422
    assert "built-in verifiers only" in dotted.json()["detail"]
    assert not probe.exists(), "the server imported a module a request named"


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"code": "x", "verifier": "sql"}, "spec"),
        ({"code": "x", "verifier": "sql", "spec": {"schema": []}}, "spec"),
        (
            {"code": "x", "verifier": "sql", "spec": SQL, "task": {"benchmark": SUITE, "id": "x"}},
            "not both",
        ),  # fmt: skip
        ({"code": "x", "task": {"benchmark": "mbpp", "id": "Mbpp/11"}}, "unit tests"),
        ({"code": "x", "task": {"benchmark": SUITE, "id": "nope"}}, "task.id"),
        ({"code": "x", "verifier": "sql", "spec": SQL, "limits": {"wall_s": 1e9}}, "limits.wall_s"),
    ],
)
def test_a_bad_verify_request_is_a_422_naming_the_field(server, body, says):
    reply = _post(server, "/v1/verify", body)
    assert reply.status_code == 422, reply.text
    assert says in reply.json()["detail"]
