"""The Ray backend on a real local Ray instance: spread over actors, a lost actor's run retried
on another actor or reported as SANDBOX_ERROR. Starting Ray takes ~25 s on 2 cores: slow."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

pytest.importorskip("ray")

from execrl.sandbox import Job, Limits, Verdict  # noqa: E402
from execrl.sandbox.service.ray_backend import RaySandbox  # noqa: E402
from execrl.tasks.schema import AssertTests, StdioCase, StdioTests  # noqa: E402

pytestmark = pytest.mark.slow

OK = Job("def f(x):\n    return x + 1\n", AssertTests("", ("assert f(1) == 2",)), entry_point="f")
BAD = Job("def f(x):\n    return x\n", AssertTests("", ("assert f(1) == 2",)), entry_point="f")
SLOW = Job("import time\ntime.sleep(3)\nprint(1)", StdioTests((StdioCase("", "1"),)),
           limits=Limits(wall_s=20))  # fmt: skip


def test_ray_backend_runs_retries_and_reports_lost_actors():
    init = {"num_cpus": 2, "object_store_memory": 80 << 20}
    with RaySandbox("local", actors=2, workers_per_actor=1, max_actor_retries=1,
                    init_kwargs=init) as rs:  # fmt: skip
        results = rs.run_many([OK, BAD] * 10)
        assert [r.verdict for r in results] == [Verdict.PASSED, Verdict.WRONG_ANSWER] * 10
        # Spread by load: two slow runs at once land on the two actors, so they overlap.
        t0 = time.monotonic()
        assert all(r.passed for r in rs.run_many([SLOW, SLOW]))
        assert time.monotonic() - t0 < 5.5
        # An actor killed mid-run: its run is retried on another actor and passes.
        pids = rs.actor_pids()
        futures = rs.submit_many([SLOW, SLOW])
        time.sleep(1.0)
        os.kill(pids[0], signal.SIGKILL)
        retried = [f.result(timeout=60) for f in futures]
        assert all(r.passed for r in retried), [r.message for r in retried]
        assert max(r.attempts for r in retried) == 2 and rs.actor_restarts == 1
        # Killed again on every attempt: SANDBOX_ERROR, never the program's failure.
        future = rs.submit_many([SLOW])[0]
        stop = threading.Event()

        def killer():
            import ray

            while not stop.is_set():
                time.sleep(0.5)
                for slot in list(rs._slots):
                    try:
                        os.kill(
                            ray.get(slot.handle.info.remote(), timeout=5)["pid"], signal.SIGKILL
                        )
                    except Exception:  # noqa: BLE001 - already dead, or still starting
                        pass

        t = threading.Thread(target=killer, daemon=True)
        t.start()
        lost = future.result(timeout=120)
        stop.set()
        t.join()
        assert lost.verdict is Verdict.SANDBOX_ERROR and "actor was lost" in lost.message


def test_actors_reserve_a_cpu_per_worker_and_never_wait_forever_for_one():
    """Actors that reserve no CPU are all packed onto the first node Ray finds (a cluster's
    sandbox on one machine); reserving one per worker, an actor the cluster cannot place is a
    clear error within the start timeout, never a wait without end."""
    import ray

    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False,
             _node_ip_address="127.0.0.1", object_store_memory=80 << 20)  # fmt: skip
    try:
        t0 = time.monotonic()
        with pytest.raises(RuntimeError, match="sandbox.ray_cpus_per_actor") as caught:
            RaySandbox("local", actors=2, workers_per_actor=1, start_timeout_s=20)
        assert time.monotonic() - t0 < 45 and "1 CPUs in all" in str(caught.value)
        with RaySandbox("local", actors=2, workers_per_actor=1, cpus_per_actor=0) as rs:
            assert [r.verdict for r in rs.run_many([OK, BAD])] == [Verdict.PASSED,
                                                                   Verdict.WRONG_ANSWER]  # fmt: skip
        with RaySandbox("local", actors=1, workers_per_actor=1) as rs:
            assert ray.available_resources().get("CPU", 0) == 0  # its worker's CPU is taken
            assert rs.run(OK).passed
    finally:
        ray.shutdown()
