"""The runner above the pool (sandbox/runner.py): each job of a batch to the harness, a checker,
a verifier or first-failure windows, by its own tests; every strategy's runs go to the transport
below, which sees only jobs it runs as they are."""

from __future__ import annotations

from execrl.sandbox import Job, Limits, Verdict
from execrl.sandbox.pool import WorkerPool
from execrl.sandbox.runner import CHECKER, FIRST_FAILURE, HARNESS, VERIFIER, JobRunner, route
from execrl.sandbox.verifiers import verification_of
from execrl.tasks.schema import CallTests, Compare, StdioCase, StdioTests, VerifierTests

ADD = Job("def add(a, b):\n    return a + b\n", CallTests(((1, 2),), (3,)), "add")
# "print a divisor of n greater than 1": the expected answer is one of several
CHECKED = StdioTests(
    (StdioCase("12\n", "2\n"), StdioCase("35\n", "5\n")),
    Compare(
        checker="program",
        checker_source="import sys\nn = int(open(sys.argv[1]).read())\n"
        "d = int(open(sys.argv[2]).read())\nsys.exit(0 if 1 < d <= n and n % d == 0 else 1)\n",
    ),
)
LARGEST = "n = int(input())\nprint(n)\n"
KNAPSACK = VerifierTests(
    "optimize",
    {"problem": "knapsack", "instance": {"weights": [3, 4, 2], "values": [4, 5, 3],
     "capacity": 6}, "best": 8},
)  # fmt: skip
ECHO = StdioTests(tuple(StdioCase(f"{k}\n", f"{k}\n") for k in range(6)))
WRONG_AT_2 = "k = int(input())\nprint(k if k != 2 else -1)\n"
LIMITS = Limits(wall_s=10)


def test_the_route_is_each_jobs_own():
    assert route(ADD) == HARNESS
    assert route(Job(LARGEST, CHECKED)) == CHECKER
    assert route(Job("print([1, 2])", KNAPSACK)) == VERIFIER
    assert route(Job(WRONG_AT_2, ECHO, stop_at_first_failure=True)) == FIRST_FAILURE
    # one case has nothing to stop before; without the option every case runs
    assert route(Job(WRONG_AT_2, StdioTests(ECHO.cases[:1]), stop_at_first_failure=True)) == HARNESS
    assert route(Job(WRONG_AT_2, ECHO)) == HARNESS


class Recording(WorkerPool):
    """The pool, keeping every job it was asked to run."""

    def __init__(self, **config: object) -> None:
        super().__init__(**config)  # type: ignore[arg-type]
        self.ran: list[Job] = []

    def run_many(self, jobs, progress=None):  # noqa: ANN001, ANN201
        self.ran.extend(jobs)
        return super().run_many(jobs, progress)


def test_one_batch_of_every_route_comes_back_in_order_from_plain_runs():
    batch = [
        Job(WRONG_AT_2, ECHO, limits=LIMITS, stop_at_first_failure=True, id="stops"),
        Job(LARGEST, CHECKED, limits=LIMITS, id="checked"),
        ADD,
        Job("print([1, 2])", KNAPSACK, limits=LIMITS, id="verified"),
        Job("input()\nprint(1)\n", CHECKED, limits=LIMITS, id="checked-wrong"),
    ]
    with JobRunner(Recording(workers=2), workers=2) as runner:
        seen: list[int] = []
        stops, checked, add, verified, wrong = runner.run_many(batch, progress=seen.append)
        ran = runner.transport.ran
    # windows of 1, then 4 cases: the wrong answer at case 2 stops it before case 5
    assert stops.verdict is Verdict.WRONG_ANSWER and stops.message.startswith("test 2")
    assert len(stops.tests) == 5 < len(ECHO)
    assert checked.passed and len(checked.tests) == 2  # 12 and 35 are right, not the answers
    assert add.passed
    assert verified.passed and verification_of(verified).score == 1.0
    assert wrong.verdict is Verdict.WRONG_ANSWER and "checker rejected" in wrong.message
    assert sum(seen) == len(batch)
    # the transport ran each job as it is: no verifier's or checker's job, no window of many
    # cases that stops early: the strategies asked for their own plain runs
    assert all(route(job) in (HARNESS, FIRST_FAILURE) for job in ran)
    assert all(route(job) == HARNESS for job in ran if not job.stop_at_first_failure)
    assert not any(isinstance(job.tests, VerifierTests) for job in ran)
