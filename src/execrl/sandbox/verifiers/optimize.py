"""`optimize`: the candidate computes a solution to an instance; the parent checks it is
feasible and scores the objective's gap to the best known value.

The program reads the instance as JSON on stdin and prints its solution as JSON, the last line
of its output. Only the instance enters the sandbox; the best known value stays in the parent.
Feasibility is a gate, as in the seeds' solver synthesis: an infeasible or unreadable solution
scores the minimum (0), whatever objective the program claims. A feasible one scores
`1 - gap`, where gap = |best - value| / |best| (0 when it matches the best known value within
`OBJECTIVE_RTOL` of max(1, |best|): float objectives summed in another order differ in the last
bits), so the best known value scores 1.0 and the verdict is PASSED only there. A feasible
solution better than that is the task's error (its best known value is wrong), which fails
this job alone (`run.task_data_error`).

Problems (spec.problem):
- "knapsack": items with `weights` and `values`, a `capacity`; the solution is a list of
  distinct item indices whose weights sum to at most the capacity; maximise the value.
- "schedule": jobs with processing times `times` and `weights` on one machine; the solution is
  an order (a permutation of the job indices); minimise the total weighted completion time.
spec: `problem`, `instance` (the fields above), `best` (the best known objective), optional
`language` of the program (default python).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any

from execrl.sandbox.grading.artifacts import program_job, program_run
from execrl.sandbox.grading.compare import same_number
from execrl.sandbox.grading.job import Job
from execrl.sandbox.grading.verdict import ExecutionResult, Verdict
from execrl.sandbox.verifiers.base import (
    Verification,
    VerifierSpecError,
    VerifyRequest,
    failed,
)

OBJECTIVE_RTOL = 1e-9

# problem -> (objective of a solution or None when infeasible, with the reason; maximise?)
Objective = Callable[[dict[str, Any], Any], tuple[float | None, str]]


def knapsack_value(instance: dict[str, Any], solution: Any) -> tuple[float | None, str]:
    n = len(instance["weights"])
    if not isinstance(solution, list) or not all(_is_int(i) for i in solution):
        return None, "the solution must be a JSON list of item indices"
    if len(set(solution)) != len(solution) or any(not 0 <= i < n for i in solution):
        return None, f"item indices must be distinct and in 0..{n - 1}"
    weight = sum(instance["weights"][i] for i in solution)
    if weight > instance["capacity"]:
        return None, f"the items weigh {weight}, over the capacity {instance['capacity']}"
    return float(sum(instance["values"][i] for i in solution)), ""


def schedule_cost(instance: dict[str, Any], solution: Any) -> tuple[float | None, str]:
    n = len(instance["times"])
    if not isinstance(solution, list) or sorted(solution) != list(range(n)):
        return None, f"the solution must be an order of the job indices 0..{n - 1}, each once"
    if not all(_is_int(i) for i in solution):
        return None, "job indices must be integers"
    clock, cost = 0.0, 0.0
    for j in solution:
        clock += instance["times"][j]
        cost += instance["weights"][j] * clock
    return cost, ""


PROBLEMS: dict[str, tuple[Objective, bool]] = {
    "knapsack": (knapsack_value, True),
    "schedule": (schedule_cost, False),
}


class OptimizeVerifier:
    name = "optimize"
    components = ("feasible", "quality")

    def jobs(self, request: VerifyRequest) -> Sequence[Job]:
        problem = request.field("problem", str)
        if problem not in PROBLEMS:
            raise VerifierSpecError(
                f"task {request.task_id}: spec.problem {problem!r} is not one of {list(PROBLEMS)}"
            )
        instance = request.field("instance", dict)
        best = request.field("best", (int, float))
        if not _finite(best):
            raise VerifierSpecError(f"task {request.task_id}: spec.best must be a finite number")
        language = str(request.spec.get("language", "python"))
        return [
            program_job(
                request.program,
                language=language,
                stdin=json.dumps(instance) + "\n",
                limits=request.limits,
                job_id=request.task_id,
            )
        ]

    def verify(self, request: VerifyRequest, runs: Sequence[ExecutionResult]) -> Verification:
        run = program_run(runs[0])
        if not run.ran:
            return failed(run.verdict, f"the program did not run to the end: {run.message}")
        objective, maximise = PROBLEMS[request.spec["problem"]]
        lines = [ln for ln in run.stdout.splitlines() if ln.strip()]
        try:
            solution = json.loads(lines[-1]) if lines else None
        except json.JSONDecodeError:
            solution = None
        if solution is None:
            return failed(
                Verdict.WRONG_ANSWER,
                "no solution: the last line of output must be the solution as JSON",
                feasible=0.0,
            )
        value, why = objective(request.spec["instance"], solution)
        if value is None:
            return failed(Verdict.WRONG_ANSWER, f"infeasible solution: {why}", feasible=0.0)
        best = float(request.spec["best"])
        optimal = same_number(value, best, OBJECTIVE_RTOL * max(1.0, abs(best)))
        if not optimal and (maximise and value > best or not maximise and value < best):
            # Better than the best known value: the best known value was wrong. Feasibility
            # was checked here, so this is the task's error, not a trick of the program.
            raise VerifierSpecError(
                f"task {request.task_id}: a feasible solution has objective {value}, better "
                f"than spec.best = {best}; correct the best known value"
            )
        gap = 0.0 if optimal else abs(best - value) / abs(best) if best else 1.0
        quality = max(0.0, 1.0 - gap) if math.isfinite(gap) else 0.0
        verdict = Verdict.PASSED if optimal else Verdict.WRONG_ANSWER
        feedback = (
            "feasible and optimal"
            if optimal
            else f"feasible, objective {value:g}, but a better solution exists"
        )
        return Verification(quality, {"feasible": 1.0, "quality": quality}, verdict, feedback)


def _finite(value: float) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an int past float's range
        return False


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
