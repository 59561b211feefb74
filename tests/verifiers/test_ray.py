"""Verifier tasks on the Ray backend: the runner in this process expands each job into its
verifier's runs, the actors run them, and the verifier scores what came back. Starting Ray is
slow."""

from __future__ import annotations

import pytest

pytest.importorskip("ray")

from execrl.sandbox import Job, Limits, SandboxConfig, Verdict  # noqa: E402
from execrl.sandbox.service.backend import open_sandbox  # noqa: E402
from execrl.sandbox.verifiers import verification_of  # noqa: E402
from execrl.tasks.catalog.registry import load_benchmark  # noqa: E402

pytestmark = pytest.mark.slow


def test_verifier_jobs_run_on_ray_actors():
    (task,) = load_benchmark("sql:n=1,difficulty=1")
    jobs = [
        Job(program, task.tests, limits=Limits(wall_s=10), id=task.id)
        for program in (task.reference, task.tests.wrong)
    ]
    ray = SandboxConfig(workers=1, backend="ray", ray_actors=2)
    with open_sandbox(ray, num_cpus=2, object_store_memory=80 << 20) as sandbox:
        right, wrong = sandbox.run_many(jobs)
    assert right.verdict is Verdict.PASSED and wrong.verdict is Verdict.WRONG_ANSWER
    assert verification_of(right).score == 1.0 and verification_of(wrong).score == 0.0
