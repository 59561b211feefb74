"""The optimize verifier: a feasibility gate, then the gap to the best known value."""

from __future__ import annotations

import re

import pytest

from execrl.sandbox import Job, Limits, Verdict
from execrl.sandbox.grading.verdict import SandboxErrorCause
from execrl.sandbox.verifiers import VerifierSpecError, verification_of
from execrl.tasks.schema import VerifierTests
from verifiers.verifier_helpers import verify

# Items (weight, value): (3, 4), (4, 5), (2, 3); capacity 6. Best: items 1 and 2, value 8.
# Greedy by value density takes item 2 (1.5), then item 0 (1.33): value 7, gap 1/8.
KNAPSACK = VerifierTests(
    "optimize",
    {
        "problem": "knapsack",
        "instance": {"weights": [3, 4, 2], "values": [4, 5, 3], "capacity": 6},
        "best": 8,
    },
)
# Jobs (time, weight): (3, 1), (1, 2). Order [1, 0]: 2*1 + 1*4 = 6 (best); [0, 1]: 3 + 2*4 = 11.
SCHEDULE = VerifierTests(
    "optimize",
    {"problem": "schedule", "instance": {"times": [3, 1], "weights": [1, 2]}, "best": 6},
)


def test_the_best_known_value_scores_one_and_a_worse_solution_its_gap(sandbox):
    (best, vb), (greedy, vg), (order, vo) = verify(
        sandbox, KNAPSACK, "print('[1, 2]')", "print('solving...')\nprint([2, 0])", "print([])"
    )
    assert best.passed and vb.score == 1.0 and vb.components["feasible"] == 1.0
    assert greedy.verdict is Verdict.WRONG_ANSWER and vg.score == pytest.approx(1 - 1 / 8)
    assert vo.score == 0.0 and vo.components["feasible"] == 1.0  # feasible, value 0: gap 1
    (fast, vf), (slow, vs) = verify(sandbox, SCHEDULE, "print([1, 0])", "print([0, 1])")
    assert fast.passed and vf.score == 1.0
    assert vs.score == pytest.approx(1 - 5 / 6)  # gap (11 - 6) / 6


def test_an_optimiser_cannot_claim_an_objective_without_a_feasible_solution(sandbox):
    """Claims without a feasible solution score the minimum: the objective is recomputed from
    the solution in the parent, never read from the program's output."""
    claims = [
        "print('objective: 8')",
        "print(8)",
        'print(\'{"objective": 8, "optimal": true}\')',
        "print([0, 1, 2])  # every item: over the capacity",
        "print([1, 1, 2])  # an item twice",
        "print([1, 7])  # no item 7",
        "print('[1, 2]')\nraise SystemExit(1)",  # the right answer, then a crash
    ]
    for (r, v), claim in zip(verify(sandbox, KNAPSACK, *claims), claims, strict=True):
        assert not r.passed and v.score == 0.0, (claim, v.feedback)
    ((r, v),) = verify(sandbox, SCHEDULE, "print([1, 1])")
    assert v.score == 0.0 and "each once" in v.feedback


def test_a_verifier_failure_is_that_jobs_verdict_never_the_batchs(sandbox):
    """Float objectives compare within a tolerance: 0.1 + 0.2 is the best known 0.3, one ulp
    off, and was a spec error that escaped `run_many` and lost every other job's grade. A task
    whose data a run shows wrong (a best known value that a feasible solution beats) fails its
    own job, masked and named; the rest of the batch is graded. A spec that cannot be read
    before anything runs is still the user's error, named."""
    floats = VerifierTests(
        "optimize",
        {
            "problem": "knapsack",
            "instance": {"weights": [1, 1, 2], "values": [0.1, 0.2, 0.3], "capacity": 2},
            "best": 0.3,
        },
    )
    wrong_best = VerifierTests("optimize", {**KNAPSACK.spec, "best": 7})
    batch = [
        Job("print([0, 1])", floats, limits=Limits(wall_s=10), id="floats"),
        Job("print([1, 2])", wrong_best, limits=Limits(wall_s=10), id="wrong-best"),
        Job("print([1, 2])", KNAPSACK, limits=Limits(wall_s=10), id="right"),
    ]
    ulp, beaten, right = sandbox.run_many(batch)
    assert ulp.passed and verification_of(ulp).score == 1.0, ulp.message
    assert right.passed
    assert beaten.verdict is Verdict.SANDBOX_ERROR, beaten
    assert beaten.sandbox_error_cause == SandboxErrorCause.TASK_DATA
    assert re.search("task wrong-best: .*better than spec.best", beaten.message), beaten.message
    unknown = VerifierTests("optimize", {**KNAPSACK.spec, "problem": "tsp"})
    with pytest.raises(VerifierSpecError, match="task unknown: spec.problem 'tsp'"):
        sandbox.run_many([Job("print([1, 2])", unknown, id="unknown")])
