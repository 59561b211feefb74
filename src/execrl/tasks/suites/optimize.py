"""The `optimize` suite: write a solver; it gets an instance on stdin and prints a solution.

Level 1: 0/1 knapsack with 6-8 items; level 2: one-machine scheduling, minimising the total
weighted completion time of 6-9 jobs; level 3: knapsack with 14-18 items and a tight capacity.
The best known value is exact (dynamic programming for the knapsack, Smith's ratio rule for
the schedule, optimal for 1||sum w_j C_j: W. E. Smith 1956). The wrong solution is the natural
greedy (by value density; shortest job first), kept only on instances where it is suboptimal.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from execrl.tasks.schema import Task, VerifierTests

KNAPSACK_DP = """import json
inst = json.loads(input())
w, v, cap = inst["weights"], inst["values"], inst["capacity"]
best = [[0] * (cap + 1) for _ in range(len(w) + 1)]
for i in range(len(w)):
    for c in range(cap + 1):
        best[i + 1][c] = best[i][c]
        if w[i] <= c:
            best[i + 1][c] = max(best[i + 1][c], best[i][c - w[i]] + v[i])
chosen, c = [], cap
for i in range(len(w), 0, -1):
    if best[i][c] != best[i - 1][c]:
        chosen.append(i - 1)
        c -= w[i - 1]
print(json.dumps(sorted(chosen)))
"""
KNAPSACK_GREEDY = """import json
inst = json.loads(input())
w, v, cap = inst["weights"], inst["values"], inst["capacity"]
chosen, load = [], 0
for i in sorted(range(len(w)), key=lambda i: -v[i] / w[i]):
    if load + w[i] <= cap:
        chosen.append(i)
        load += w[i]
print(json.dumps(chosen))
"""
SCHEDULE_SMITH = """import json
inst = json.loads(input())
p, w = inst["times"], inst["weights"]
print(json.dumps(sorted(range(len(p)), key=lambda j: p[j] / w[j])))
"""
SCHEDULE_SPT = """import json
inst = json.loads(input())
p = inst["times"]
print(json.dumps(sorted(range(len(p)), key=lambda j: p[j])))
"""


def make(rng: random.Random, level: int, data_dir: Path | None = None) -> Task | None:
    if level == 2:
        return _schedule(rng)
    return _knapsack(rng, rng.randint(6, 8) if level == 1 else rng.randint(14, 18))


def _knapsack(rng: random.Random, n: int) -> Task | None:
    weights = [rng.randint(2, 20) for _ in range(n)]
    values = [rng.randint(1, 30) for _ in range(n)]
    capacity = sum(weights) // rng.choice((2, 3))
    instance = {"weights": weights, "values": values, "capacity": capacity}
    best = knapsack_best(weights, values, capacity)
    if knapsack_greedy(weights, values, capacity) >= best:
        return None
    prompt = (
        "Write a Python program for the 0/1 knapsack problem. It reads one line of JSON from "
        'stdin, {"weights": [...], "values": [...], "capacity": C}, and prints, as its last '
        "line, a JSON list of distinct item indices (0-based) whose weights sum to at most C, "
        f"with the largest total value you can find. Instances have up to {n} items.\n"
        'Example input: {"weights": [3, 4, 2], "values": [4, 5, 3], "capacity": 6}, output: '
        "[1, 2]. It is graded on an instance it is not shown."
    )
    spec = {"problem": "knapsack", "instance": instance, "best": best}
    return _task(prompt, spec, KNAPSACK_DP, KNAPSACK_GREEDY)


def _schedule(rng: random.Random) -> Task | None:
    n = rng.randint(6, 9)
    times = [rng.randint(1, 12) for _ in range(n)]
    weights = [rng.randint(1, 9) for _ in range(n)]
    instance = {"times": times, "weights": weights}
    best = schedule_cost(times, weights, sorted(range(n), key=lambda j: times[j] / weights[j]))
    if schedule_cost(times, weights, sorted(range(n), key=lambda j: times[j])) <= best:
        return None
    prompt = (
        "Write a Python program that schedules jobs on one machine. It reads one line of JSON "
        'from stdin, {"times": [...], "weights": [...]} (job j takes times[j] and has weight '
        "weights[j]), and prints, as its last line, a JSON list giving the order in which to "
        "run the jobs (each index 0..n-1 once) that makes the total weighted completion time, "
        "the sum over jobs of weight times finishing time, as small as possible.\n"
        'Example input: {"times": [3, 1], "weights": [1, 2]}, output: [1, 0]. It is graded '
        "on an instance it is not shown."
    )
    spec = {"problem": "schedule", "instance": instance, "best": best}
    return _task(prompt, spec, SCHEDULE_SMITH, SCHEDULE_SPT)


def _task(prompt: str, spec: dict[str, Any], reference: str, wrong: str) -> Task:
    return Task(
        id="", prompt=prompt, tests=VerifierTests("optimize", spec, wrong), reference=reference
    )


def knapsack_best(weights: list[int], values: list[int], capacity: int) -> int:
    best = [0] * (capacity + 1)
    for w, v in zip(weights, values, strict=True):
        for c in range(capacity, w - 1, -1):
            best[c] = max(best[c], best[c - w] + v)
    return best[capacity]


def knapsack_greedy(weights: list[int], values: list[int], capacity: int) -> int:
    load = total = 0
    for i in sorted(range(len(weights)), key=lambda i: -values[i] / weights[i]):
        if load + weights[i] <= capacity:
            load, total = load + weights[i], total + values[i]
    return total


def schedule_cost(times: list[int], weights: list[int], order: list[int]) -> int:
    clock = cost = 0
    for j in order:
        clock += times[j]
        cost += weights[j] * clock
    return cost
