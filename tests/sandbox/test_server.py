"""`execrl sandbox serve`: SandboxFusion compatibility, graded runs, bad input, backpressure,
auth, a worker killed mid-run, graceful shutdown. Servers run as subprocesses on 127.0.0.1."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from execrl.sandbox import Job, Limits, Verdict  # noqa: E402
from execrl.sandbox.service.client import AsyncSandboxClient, SandboxClient, SandboxServerError  # noqa: E402
from execrl.tasks.schema import AssertTests, CallTests, Compare, StdioCase, StdioTests  # noqa: E402


class Server:
    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        cmd = [sys.executable, "-m", "execrl.cli", "sandbox", "serve", "--port", "0", *args]
        self.proc = subprocess.Popen(
            cmd, stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})}
        )
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline()
        m = re.search(r"listening on (http://\S+)", line)
        assert m, f"server did not start: {line}{self.proc.stderr.read()}"
        self.url = m.group(1)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)


@pytest.fixture(scope="module")
def server():
    s = Server("--workers", "2", "--max-retries", "0")
    yield s
    assert s.stop() == 0


@pytest.fixture(scope="module")
def client(server):
    with SandboxClient(server.url, retries=2) as c:
        yield c


def sf_run(url, **request):
    sf = pytest.importorskip("sandbox_fusion")
    return sf.run_code(sf.RunCodeRequest(**request), endpoint=url, max_attempts=1)


def test_sandbox_fusion_client_python_cpp_javascript(server):
    r = sf_run(server.url, code="print('hi')\nimport sys\nsys.exit(3)", language="python")
    assert (r.status.value, r.run_result.return_code, r.run_result.stdout) == ("Failed", 3, "hi\n")
    r = sf_run(server.url, code="print(input()[::-1])", language="python", stdin="abc\n")
    assert (r.status.value, r.run_result.return_code, r.run_result.stdout) == (
        "Success",
        0,
        "cba\n",
    )
    r = sf_run(server.url, code="1/0", language="python")
    assert r.run_result.return_code == 1 and "ZeroDivisionError" in r.run_result.stderr
    cpp = "#include <iostream>\nint main(){int n;std::cin>>n;std::cout<<n*2<<std::endl;return n;}"
    r = sf_run(server.url, code=cpp, language="cpp", stdin="21")
    assert r.compile_result.return_code == 0
    assert (r.run_result.return_code, r.run_result.stdout) == (21, "42\n")
    r = sf_run(server.url, code="int main( {", language="cpp")
    assert r.status.value == "Failed" and r.run_result is None
    assert r.compile_result.return_code != 0 and "error" in r.compile_result.stderr
    r = sf_run(server.url, code="console.log([1,2,3].map(x=>x*x).join(' '))", language="nodejs")
    assert (r.status.value, r.run_result.stdout) == ("Success", "1 4 9\n")
    r = sf_run(server.url, code="process.exit(4)", language="nodejs")
    assert r.run_result.return_code == 4
    for lang, code in [("python", "while True: pass"), ("nodejs", "for(;;){}"),
                       ("cpp", "int main(){for(;;){}}")]:  # fmt: skip
        r = sf_run(server.url, code=code, language=lang, run_timeout=1)
        assert r.run_result.status.value == "TimeLimitExceeded", lang
        assert r.status.value == "Failed" and 0.9 < r.run_result.execution_time < 3


def test_verl_style_payload_and_files(server):
    body = {"code": "import sys\nprint(open('in.txt').read() + sys.stdin.read())\n"
            "open('o.txt','w').write('x')", "language": "python", "stdin": "B", "run_timeout": 5,
            "compile_timeout": 5, "memory_limit_MB": 512, "files": {"in.txt": "QQ=="},
            "fetch_files": ["o.txt"]}  # fmt: skip
    r = httpx.post(server.url + "/run_code", json=body, timeout=30).json()
    assert r["status"] == "Success" and r["run_result"]["stdout"] == "AB\n"
    assert r["files"] == {"o.txt": "eA=="}


def test_graded_runs_with_per_test_detail(client):
    f = "def f(x):\n    return x * 2 if x < 3 else 0\n"
    asserts = AssertTests("", ("assert f(1) == 2", "assert f(5) == 10"))
    r = client.run(Job(f, asserts, entry_point="f"))
    assert r.verdict is Verdict.WRONG_ANSWER and [t.verdict for t in r.tests] == [
        Verdict.PASSED,
        Verdict.WRONG_ANSWER,
    ]
    calls = CallTests(((1,), ((1, 2),)), (2, (1, 2, 1, 2)))
    r = client.run(Job("def f(x):\n    return x * 2\n", calls, entry_point="f"))
    assert r.passed and r.n_passed == 2  # the tuple survived the trip as a tuple
    stdio = StdioTests((StdioCase("2\n", "4\n"), StdioCase("3\n", "6\n")))
    jobs = [Job("print(int(input())*2)", stdio), Job("print(1)", stdio), Job("def (", stdio)]
    got = [r.verdict for r in client.run_many(jobs)]
    assert got == [Verdict.PASSED, Verdict.WRONG_ANSWER, Verdict.SYNTAX_ERROR]
    c = '#include <stdio.h>\nint main(){int n;scanf("%d",&n);printf("%d\\n",2*n);}'
    assert client.run(Job(c, stdio, language="c")).passed


def test_a_job_that_stops_at_its_first_failure_stops_there_through_the_server(client):
    """`Job.stop_at_first_failure` (reward.stop_at_first_failure) means the same through the
    server as on the local pool: the cases after the first failing one are not run."""
    cases = tuple(StdioCase(str(n), str(n)) for n in range(6))
    program = "import sys\nn = int(sys.stdin.read())\nprint(n if n != 1 else -1)\n"
    job = Job(program, StdioTests(cases), stop_at_first_failure=True)
    result = client.run(job)
    assert result.verdict is Verdict.WRONG_ANSWER
    # windows of 1 then 4 cases: case 1 fails in the second, case 5 is never run
    assert len(result.tests) == 5 and result.extra["skipped_after_failure"] == 1
    (batched,) = client.run_many([job])
    assert batched.extra["skipped_after_failure"] == 1


def test_a_served_task_with_a_checker_program_is_judged_by_its_checker(client):
    """A problem with several right answers: the checker accepts 12's largest divisor, which
    is not the expected answer (the server ran it without its checker: WRONG_ANSWER)."""
    checker = ("import sys\nn = int(open(sys.argv[1]).read())\n"
               "d = int(open(sys.argv[2]).read())\nsys.exit(0 if 1 < d <= n and n % d == 0 else 1)\n")  # fmt: skip
    cmp = Compare(checker="program", checker_source=checker)
    tests = StdioTests((StdioCase("12\n", "2\n"), StdioCase("35\n", "5\n")), cmp)
    largest, one = "n = int(input())\nprint(n)\n", "input()\nprint(1)\n"
    plain = Job("print(int(input())*2)", StdioTests((StdioCase("2\n", "4\n"),)))
    right, wrong, other = client.run_many([Job(largest, tests), Job(one, tests), plain])
    assert right.passed and right.n_passed == 2, right.message
    assert wrong.verdict is Verdict.WRONG_ANSWER and "checker rejected" in wrong.message
    assert other.passed  # the batch's other jobs as before, in order


def test_async_client(server):
    async def go():
        async with AsyncSandboxClient(server.url, batch_size=3) as c:
            jobs = [Job(f"print({i})", StdioTests((StdioCase("", str(i)),))) for i in range(7)]
            results = await c.run_many(jobs)
            single = await c.run(jobs[0])
            return results, single, await c.health()

    results, single, health = asyncio.run(go())
    assert all(r.passed for r in results) and single.passed and health["status"] == "ok"


@pytest.mark.parametrize(
    "path,body,status",
    [
        ("/run_code", b"{bad json", 400),
        ("/run_code", {"code": "x"}, 422),  # language missing
        ("/run_code", {"code": "x", "language": "cobol"}, 422),
        ("/run_code", {"code": "x", "language": "python", "run_timeout": -1}, 422),
        ("/run_code", {"code": "x", "language": "python", "run_timeout": 1e9}, 422),
        ("/run_code", {"code": "x", "language": "python", "compile_timeout": 0}, 422),
        ("/run_code", {"code": "x" * (2 << 20), "language": "python"}, 413),
        ("/run_code", {"code": "x", "language": "python", "stdin": "y" * (9 << 20)}, 413),
        ("/run_code", {"code": "x", "language": "python", "files": {"a": "!!"}}, 422),
        ("/run_code", {"code": "x", "language": "python", "files": {"../a": "QQ=="}}, 422),
        ("/run_code", [1, 2], 422),
        ("/v1/run", {"code": "x"}, 422),  # neither tests nor task
        ("/v1/run", {"code": "x", "tests": {"kind": "weird"}}, 422),
        ("/v1/run", {"code": "x", "tests": {"kind": "call", "inputs": [[1]]}}, 422),
        ("/v1/run", {"code": "x", "tests": {"kind": "assert", "statements": []}}, 422),
        ("/v1/run", {"code": "x", "tests": {"kind": "stdio", "cases": [{"stdin": ""}]}}, 422),
        (
            "/v1/run",
            {
                "code": "x",
                "tests": {"kind": "assert", "statements": ["1"]},
                "limits": {"wall_s": -3},
            },
            422,
        ),  # fmt: skip
        (
            "/v1/run",
            {
                "code": "x",
                "tests": {"kind": "assert", "statements": ["1"]},
                "limits": {"memory_mb": 10**9},
            },
            422,
        ),  # fmt: skip
        (
            "/v1/run",
            {"code": "x", "tests": {"kind": "assert", "statements": ["1"]}, "limits": {"bogus": 1}},
            422,
        ),  # fmt: skip
        ("/v1/run", {"code": "x", "task": {"benchmark": "jsonl:/etc/passwd", "id": "1"}}, 422),
        ("/v1/run", {"code": "x", "task": {"benchmark": "nosuchbench", "id": "1"}}, 422),
        ("/v1/run_batch", {"runs": []}, 422),
        ("/run_code", b"x" * (17 << 20), 413),
    ],
)
def test_bad_input_is_a_clear_4xx(server, path, body, status):
    kw = {"content": body} if isinstance(body, bytes) else {"json": body}
    headers = {"content-type": "application/json"}
    r = httpx.post(server.url + path, headers=headers, timeout=30, **kw)
    assert r.status_code == status, r.text
    assert r.json()["detail"]


def test_health_and_metrics(server, client):
    client.run_code("print(1)")
    h = client.health()
    assert h["status"] == "ok" and h["workers"] == 2 and len(h["worker_pids"]) == 2
    assert "python" in h["languages"]
    text = client.metrics()
    for name in ("execrl_executions_total", 'execrl_verdicts_total{verdict="PASSED"}',
                 "execrl_run_latency_seconds_bucket", "execrl_queue_depth",
                 "execrl_active_workers", "execrl_run_latency_seconds_count"):  # fmt: skip
        assert name in text
    assert int(re.search(r"^execrl_executions_total (\d+)$", text, re.M).group(1)) >= 1


def test_a_killed_worker_is_sandbox_error_and_replaced(server, client):
    before = set(client.health()["worker_pids"])
    slow = Job("import time\ntime.sleep(5)\n", StdioTests((StdioCase("", ""),)),
               limits=Limits(wall_s=10))  # fmt: skip
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("r", client.run(slow)))
    t.start()
    victim = None
    for _ in range(100):  # the worker whose child is running the sleeper
        time.sleep(0.05)
        for pid in before:
            kids = open(f"/proc/{pid}/task/{pid}/children").read().split()
            if kids:
                victim = pid
        if victim:
            break
    assert victim, "the run never started"
    os.kill(victim, signal.SIGKILL)
    t.join(30)
    assert out["r"].verdict is Verdict.SANDBOX_ERROR
    after = client.health()
    assert victim not in after["worker_pids"] and len(after["worker_pids"]) == 2
    assert after["worker_restarts"] >= 1
    assert client.run(Job("print(1)", StdioTests((StdioCase("", "1"),)))).passed


def test_backpressure_auth_and_graceful_shutdown():
    s = Server("--workers", "1", "--max-queue", "2", env={"EXECRL_SANDBOX_TOKEN": "s3cret"})
    try:
        assert httpx.get(s.url + "/health").status_code == 200  # health needs no token
        body = {"code": "print(1)", "language": "python"}
        assert httpx.post(s.url + "/run_code", json=body).status_code == 401
        bad = httpx.post(s.url + "/run_code", json=body, headers={"Authorization": "Bearer x"})
        assert bad.status_code == 401
        auth = {"Authorization": "Bearer s3cret"}
        sleeper = {"code": "import time\ntime.sleep(1.5)\nprint('ok')", "language": "python"}

        def post(out, i):
            out[i] = httpx.post(s.url + "/run_code", json=sleeper, headers=auth, timeout=60)

        out: dict[int, httpx.Response] = {}
        threads = [threading.Thread(target=post, args=(out, i)) for i in range(6)]
        for t in threads:
            t.start()
            time.sleep(0.05)
        for t in threads:
            t.join()
        codes = sorted(r.status_code for r in out.values())
        assert 503 in codes and 200 in codes, codes
        refused = next(r for r in out.values() if r.status_code == 503)
        assert refused.headers["retry-after"] == "1" and "retry" in refused.json()["detail"]
        # The client retries the refusal (infrastructure), and gets the verdict in the end.
        with SandboxClient(s.url, token="s3cret", retries=20, backoff_s=0.05) as c:
            with pytest.raises(SandboxServerError, match="HTTP 422"):
                c.run_code("x", language="cobol")  # a client error is never retried
            pids = c.health()["worker_pids"]
            # Graceful shutdown: a run in flight when SIGTERM arrives still gets its answer.
            res: dict[str, object] = {}
            t = threading.Thread(target=lambda: res.setdefault("r", c.run_code(**sleeper)))
            t.start()
            time.sleep(0.5)
            s.proc.send_signal(signal.SIGTERM)
            t.join(30)
        assert res["r"]["run_result"]["stdout"] == "ok\n"
        assert s.proc.wait(timeout=30) == 0
        for pid in pids:  # no worker (nor anything of theirs) left behind
            assert not os.path.exists(f"/proc/{pid}")
    finally:
        s.stop()


def test_client_never_retries_a_verdict(server):
    requests = []

    def hook(request):
        requests.append(request.url.path)

    c = SandboxClient(server.url, retries=5)
    c._http.event_hooks["request"] = [hook]
    r = c.run(Job("raise SystemExit(1)", StdioTests((StdioCase("", ""),))))
    assert r.verdict is Verdict.RUNTIME_ERROR and requests == ["/v1/run"]
    c.close()
