"""A program cannot buy a masked sample: SANDBOX_ERROR (which training masks, forgiving the
sample) is for infrastructure failures only. Whatever a program does in its own run (its
scratch directory, its output, its worker) ends in a program verdict."""

from __future__ import annotations

import os
import subprocess
import threading
import time

from execrl.sandbox import Job, Sandbox, Verdict, WorkerPool
from execrl.sandbox.grading.grade import grade
from execrl.sandbox.run import scratch
from execrl.tasks import StdioCase, StdioTests, values
from sandbox_helpers import HONEST, call_job

DEEP_TREE = (
    "import os\n"
    "for _ in range(5000):\n"
    "    os.mkdir('d')\n"
    "    os.chdir('d')\n"
    "open('marker', 'w').close()\n"
)


def test_a_deep_directory_tree_in_scratch_never_masks_the_run():
    """5,000 nested directories made `shutil.rmtree` recurse past Python's limit in the worker,
    which died: the run was retried on fresh workers, died each time, and came back masked."""
    wrong = DEEP_TREE + "def f(x):\n    return x\n"
    right = DEEP_TREE + "def f(x):\n    return x + 1\n"
    stdio = Job(DEEP_TREE + "print(2)\n", StdioTests((StdioCase("", "1"),)))
    with Sandbox(workers=1, max_retries=2) as sb:
        results = sb.run_many([call_job(wrong, [(1,)], [2]), call_job(right, [(1,)], [2]), stdio])
        assert [r.verdict for r in results] == [
            Verdict.WRONG_ANSWER,
            Verdict.PASSED,
            Verdict.WRONG_ANSWER,
        ], [r.message for r in results]
        assert all(r.attempts == 1 and not r.sandbox_error_cause for r in results)
        # Nothing the runs made is left for the next run to find.
        probe = "import os\ndef f(x):\n    return os.listdir('.') == [] and x\n"
        assert sb.run(call_job(probe, [(2,)], [2])).passed
        assert sb.stats.worker_restarts == 0 and sb.stats.sandbox_errors == 0


def test_a_job_that_kills_its_worker_on_every_attempt_is_a_runtime_error_flagged_as_a_hack():
    """However a run brings down its worker, if it does so on every attempt (a fresh worker
    each time) the sample is failed and flagged, never masked."""
    program = "import time\ndef f(x):\n    time.sleep(3)\n    return x + 1\n"
    with Sandbox(workers=1, max_retries=2) as sb:
        stop = threading.Event()

        def kill_whoever_runs_it() -> None:
            while not stop.is_set():
                for pid in sb.worker_pids():
                    try:
                        with open(f"/proc/{pid}/task/{pid}/children") as fh:
                            busy = fh.read().split()
                    except OSError:
                        continue
                    if busy:  # the run's child exists: its worker is running the job
                        time.sleep(0.2)
                        try:
                            os.kill(pid, 9)
                        except ProcessLookupError:
                            pass
                time.sleep(0.02)

        killer = threading.Thread(target=kill_whoever_runs_it, daemon=True)
        killer.start()
        try:
            r = sb.run(call_job(program, [(1,)], [2], wall_s=10))
        finally:
            stop.set()
            killer.join()
        assert r.verdict is Verdict.RUNTIME_ERROR, (r.verdict, r.message)
        assert r.attempts == 3 and not r.sandbox_error_cause
        assert "died or hung on each of its 3 attempts" in r.message
        assert "killed or hung its sandbox worker" in r.possible_hack
        assert sb.stats.possible_hacks == 1 and sb.stats.sandbox_errors == 0
        assert sb.run(call_job(HONEST, [(1,)], [2])).passed


def test_a_scratch_directory_the_sandbox_could_not_remove_fails_the_run():
    """What is left in the scratch is the run's doing: its verdict, not a masked sample."""
    job = call_job(HONEST, [(1,)], [2])
    events = [
        {"t": "start", "i": 0},
        {"t": "result", "i": 0, "ok": True, "value": values.encode(2), "wall": 0.0},
        {"t": "done", "n": 1},
    ]
    raw = {"events": events, "exit_code": 0, "scratch_left": False}
    assert grade(job, [raw]).passed
    r = grade(job, [dict(raw, scratch_left=True)])
    assert r.verdict is Verdict.RUNTIME_ERROR and "could not be removed" in r.message


def test_scratch_cleanup_never_raises_and_removes_any_tree(tmp_path):
    """No recursion, no path longer than PATH_MAX, unreadable directories, links."""
    import tempfile
    from pathlib import Path

    # On tmpfs, as the worker's scratch is (a journalled disk takes ms per directory).
    base = tempfile.mkdtemp(dir="/dev/shm") if os.path.isdir("/dev/shm") else str(tmp_path)
    top = Path(base) / "scratch"
    top.mkdir()
    here = os.getcwd()
    os.chdir(top)
    try:
        for level in range(3000):  # 6,000 characters of path: past PATH_MAX (4,096)
            os.mkdir("d")
            os.chdir("d")
            if level % 500 == 0:
                os.mkdir("locked")
                os.chmod("locked", 0)
                os.symlink("/etc", "link")
                open("file", "w").close()
    finally:
        os.chdir(here)
    try:
        assert scratch.remove_scratch(str(top)) is True
        assert not top.exists()
        assert scratch.remove_scratch(str(top)) is True  # absent already: fine
    finally:
        # A tree this deep left behind crashes pytest's own clean-up of old temporary
        # directories (shutil.rmtree recursion) in a later session: never leave it.
        if top.exists():
            subprocess.run(["rm", "-rf", "--one-file-system", base], check=False)
        elif base != str(tmp_path):
            os.rmdir(base)


def test_the_cause_and_the_hack_flag_cross_the_server_wire():
    from execrl.sandbox import ExecutionResult
    from execrl.sandbox.service.wire import result_from_json, result_to_json

    for r in (
        ExecutionResult(Verdict.SANDBOX_ERROR, n_tests=1, sandbox_error_cause="worker_died"),
        ExecutionResult(Verdict.RUNTIME_ERROR, n_tests=1, possible_hack="killed its worker"),
    ):
        back = result_from_json(result_to_json(r))
        assert (back.sandbox_error_cause, back.possible_hack) == (
            r.sandbox_error_cause,
            r.possible_hack,
        )


def test_a_worker_that_fails_a_run_retires_and_no_queued_result_shifts():
    """The worker raised while preparing a run (a file under a path the job also gives as a
    file): it reports a setup failure and retires; the requests pipelined behind it go to its
    fresh replacement, each to its own job, through both the batch pool and the dispatcher."""
    from execrl.sandbox.service.dispatch import Dispatcher

    bad = Job("print(1)", StdioTests((StdioCase("", "1"),)), files=(("a", b"x"), ("a/b", b"y")))
    honest = [call_job(HONEST, [(k,)], [k + 1]) for k in range(3)]
    wrong = call_job("def f(x):\n    return x\n", [(1,)], [2])
    with Sandbox(workers=1, max_retries=1) as sb:
        results = sb.run_many([bad, honest[0], wrong, honest[1]])
        assert [r.verdict for r in results] == [
            Verdict.SANDBOX_ERROR,
            Verdict.PASSED,
            Verdict.WRONG_ANSWER,
            Verdict.PASSED,
        ]
        assert results[0].sandbox_error_cause == "setup_failed" and results[0].attempts == 2
        assert "the worker failed" in results[0].message
        assert sb.stats.worker_restarts == 2 and sb.stats.sandbox_error_causes == {
            "setup_failed": 1
        }
    dispatcher = Dispatcher(WorkerPool(workers=1, max_retries=0))
    try:
        futures = dispatcher.submit_many([bad, wrong, honest[2]])
        verdicts = [f.result(timeout=60).verdict for f in futures]
    finally:
        dispatcher.close()
    assert verdicts == [Verdict.SANDBOX_ERROR, Verdict.WRONG_ANSWER, Verdict.PASSED]


def test_a_hung_worker_is_killed_and_replaced_never_waited_for():
    """A worker that stops answering (here: stopped) is killed once the job's own limits and
    `hang_s` have passed; the pool goes on with a fresh one."""
    import signal

    program = "import time\ndef f(x):\n    time.sleep(0.5)\n    return x + 1\n"
    with Sandbox(workers=1, max_retries=0, hang_s=1.0) as sb:
        pid = sb.worker_pids()[0]
        timer = threading.Timer(0.2, os.kill, (pid, signal.SIGSTOP))
        timer.start()
        t0 = time.monotonic()
        r = sb.run(call_job(program, [(1,)], [2], wall_s=1))
        timer.join()
        assert time.monotonic() - t0 < 10
        assert r.verdict is Verdict.SANDBOX_ERROR and r.sandbox_error_cause == "worker_hung"
        assert "no answer within 2s" in r.message
        assert sb.worker_pids()[0] != pid
        assert sb.run(call_job(HONEST, [(1,)], [2])).passed
