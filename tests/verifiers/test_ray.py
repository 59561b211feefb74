"""Verifier tasks on the Ray backend: each job goes to an actor whose local sandbox expands and
scores it, and the verification comes back with the result. Starting Ray is slow."""

from __future__ import annotations

import pytest

pytest.importorskip("ray")

from execrl.sandbox import Job, Limits, Verdict  # noqa: E402
from execrl.sandbox.service.ray_backend import RaySandbox  # noqa: E402
from execrl.sandbox.verifiers import verification_of  # noqa: E402
from execrl.tasks.registry import load_benchmark  # noqa: E402

pytestmark = pytest.mark.slow


def test_verifier_jobs_run_on_ray_actors():
    (task,) = load_benchmark("sql:n=1,difficulty=1")
    jobs = [
        Job(program, task.tests, limits=Limits(wall_s=10), id=task.id)
        for program in (task.reference, task.tests.wrong)
    ]
    init = {"num_cpus": 2, "object_store_memory": 80 << 20}
    with RaySandbox("local", actors=2, workers_per_actor=1, init_kwargs=init) as rs:
        right, wrong = rs.run_many(jobs)
    assert right.verdict is Verdict.PASSED and wrong.verdict is Verdict.WRONG_ANSWER
    assert verification_of(right).score == 1.0 and verification_of(wrong).score == 0.0
