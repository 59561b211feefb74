"""Attack classes on the task sets `execrl sandbox serve` loads for a request's `task`:
a client naming a file of the server's machine (only the configured data directory is served,
and the refusal is the same whether the file exists or not), and one request stalling the
server (loads run off the event loop, the cache and every size a request names are bounded,
/health answers throughout). One server, with a token, as a subprocess on 127.0.0.1."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from fastapi import HTTPException  # noqa: E402
from tests.sandbox.test_server import Server  # noqa: E402

from execrl.sandbox.service.server_config import ServerConfig  # noqa: E402
from execrl.sandbox.service.server_tasks import PATH_REFUSED, TaskSets  # noqa: E402
from execrl.tasks.schema import AssertTests, Task  # noqa: E402

TOKEN = "task-sets-s3cret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
CONTEST_LOADERS = ("apps", "livecodebench", "taco", "codecontests", "kodcode", "primeintellect")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    data = tmp_path_factory.mktemp("data")
    s = Server("--workers", "1", "--max-retries", "0",
               env={"EXECRL_SANDBOX_TOKEN": TOKEN, "EXECRL_DATA_DIR": str(data)})  # fmt: skip
    yield s
    assert s.stop() == 0


def _run(server, benchmark: str, timeout: float = 60) -> httpx.Response:
    body = {"code": "x", "task": {"benchmark": benchmark, "id": "1"}}
    return httpx.post(server.url + "/v1/run", json=body, headers=AUTH, timeout=timeout)


@pytest.mark.parametrize("loader", CONTEST_LOADERS)
def test_a_client_named_path_is_refused_the_same_whether_or_not_it_exists(server, loader):
    """`NAME:PATH` outside the server's data directory: one answer for a file that exists
    (/etc/passwd), one that does not, and a symlink's way out, so a client learns nothing of
    the server's files, and nothing there is opened."""
    answers = []
    for path in ("/etc/passwd", "/etc/no-such-file", "/proc/self/environ", "hf"):
        r = _run(server, f"{loader}:{path}")
        answers.append((r.status_code, r.json()["detail"]))
    assert answers[0][0] == 422 and len(set(answers)) == 1, answers
    assert "passwd" not in answers[0][1]


def test_health_answers_while_hostile_task_sets_load(server):
    """Requests naming task sets that take long to make (synthetic sets of the largest size
    served, each seed a new set the cache must hold or drop) and one past any size served:
    /health answers each probe in well under a second throughout, and the oversized set is
    refused at once."""
    answers: list[int] = []

    def hostile(seed: int) -> None:
        answers.append(_run(server, f"synthetic:n=1000,seed={seed}", timeout=120).status_code)

    loads = [threading.Thread(target=hostile, args=(seed,)) for seed in range(6)]
    for t in loads:
        t.start()
    worst = 0.0
    while any(t.is_alive() for t in loads):
        t0 = time.monotonic()
        assert httpx.get(server.url + "/health", timeout=10).status_code == 200
        worst = max(worst, time.monotonic() - t0)
        time.sleep(0.02)
    assert worst < 1.0, f"/health took {worst:.2f} s while task sets loaded"
    assert answers == [422] * 6  # no task "1" in a synthetic set: loaded, then refused
    t0 = time.monotonic()
    r = _run(server, "synthetic:n=100000000")
    assert r.status_code == 422 and "n=100000000" in r.json()["detail"], r.text
    assert time.monotonic() - t0 < 1.0
    r = _run(server, "synthetic:n=10," + "x" * 100_000)
    assert r.status_code == 422 and len(r.json()["detail"]) < 1000


# -- TaskSets in process: what is served, the cache, one load per set -----------------------

FIXTURES = Path(__file__).parents[1] / "fixtures" / "contest"


def _sets(calls: list[str] | None = None, **config) -> TaskSets:
    def load(name: str) -> list[Task]:
        if calls is not None:
            calls.append(name)
        time.sleep(0.05)
        return [Task(id=name, prompt="p", tests=AssertTests("", ("assert True",)))]

    return TaskSets(ServerConfig(**config), load if calls is not None else None)


def test_a_file_in_the_data_directory_is_served():
    sets = _sets(data_dirs=(str(FIXTURES),))
    loaded = asyncio.run(sets.for_request([f"livecodebench:{FIXTURES}/livecodebench.jsonl"]))
    [tasks] = loaded.values()
    assert tasks and all(isinstance(t, Task) for t in tasks.values())
    with pytest.raises(HTTPException) as refused:  # the same loader, a path outside
        sets.check(f"livecodebench:{FIXTURES}/../contest/../../../etc/passwd")
    assert refused.value.detail == PATH_REFUSED


def test_the_cache_keeps_the_most_recently_used_sets_and_loads_each_once():
    calls: list[str] = []
    sets = _sets(calls, max_task_sets=2)

    async def scenario() -> None:
        # three requests for one set at once: one load
        await asyncio.gather(*(sets.for_request(["synthetic:n=1"]) for _ in range(3)))
        await sets.for_request(["synthetic:n=2"])
        await sets.for_request(["synthetic:n=1"])  # used again: n=2 is now the oldest
        await sets.for_request(["synthetic:n=3"])  # drops n=2
        await sets.for_request(["synthetic:n=1", "synthetic:n=2"])

    asyncio.run(scenario())
    assert calls == ["synthetic:n=1", "synthetic:n=2", "synthetic:n=3", "synthetic:n=2"]
    assert list(sets._sets) == ["synthetic:n=1", "synthetic:n=2"]
    with pytest.raises(HTTPException, match="3 benchmarks in one request; the limit is 2"):
        asyncio.run(sets.for_request([f"synthetic:n={n}" for n in range(3)]))


def test_every_size_a_name_gives_is_bounded():
    sets = _sets(max_generated_tasks=50)
    for name in ("synthetic:n=51", "sql:n=51", "synthetic:n=-1", "sql:n=1e9", "x" * 2000):
        with pytest.raises(HTTPException) as refused:
            sets.check(name)
        assert refused.value.status_code == 422 and len(refused.value.detail) < 300
    sets.check("synthetic:n=50")
    sets.check("sql:split=test,n=50")
