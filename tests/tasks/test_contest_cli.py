"""The contest benchmarks through the CLI: `tasks list` names them, `tasks validate` passes every
fixture's reference solutions, and `eval-samples` grades samples (whole programs, or completions
whose code is fenced) with each benchmark's rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from execrl.cli import main
from execrl.sandbox import Job, Limits, Sandbox
from execrl.tasks import load_benchmark

FIXTURES = Path(__file__).parents[1] / "fixtures" / "contest"
WITH_REFERENCES = ("apps", "taco", "codecontests", "kodcode", "primeintellect")


def spec(name: str) -> str:
    return f"{name}:{FIXTURES / (name + '.jsonl')}"


def test_tasks_list_names_the_contest_benchmarks(capsys):
    assert main(["tasks", "list"]) == 0
    out = capsys.readouterr().out
    for name in ("livecodebench", "apps", "taco", "codecontests", "kodcode", "primeintellect"):
        assert f"{name}:PATH" in out


@pytest.mark.parametrize("name", WITH_REFERENCES)
def test_validate_passes_every_reference(name, capsys):
    assert main(["tasks", "validate", spec(name), "--workers", "1"]) == 0
    n = len(load_benchmark(spec(name)))
    assert f"{n}/{n} reference solutions pass" in capsys.readouterr().out


def _eval(samples: list[dict], bench: str, tmp_path: Path, *extra: str) -> list[dict]:
    path = tmp_path / "samples.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in samples))
    out = tmp_path / "results.jsonl"
    code = main(["eval-samples", str(path), "--benchmark", bench, "--output", str(out), *extra])
    assert code == 0
    return [json.loads(line) for line in out.read_text().splitlines()]


@pytest.mark.parametrize("name", WITH_REFERENCES)
def test_eval_samples_passes_references_and_fails_a_wrong_program(name, tmp_path):
    tasks = load_benchmark(spec(name))
    samples = [{"task_id": t.id, "solution": t.reference} for t in tasks]
    samples += [{"task_id": t.id, "solution": "print('wrong')\n"} for t in tasks]
    results = _eval(samples, spec(name), tmp_path, "--workers", "1")
    assert [r["passed"] for r in results] == [True] * len(tasks) + [False] * len(tasks)


def test_livecodebench_samples_stdin_and_functional(tmp_path):
    samples = [json.loads(line) for line in (FIXTURES / "livecodebench_samples.jsonl").open()]
    results = _eval(samples, spec("livecodebench"), tmp_path, "--workers", "1")
    assert [(r["task_id"], r["verdict"]) for r in results] == [
        ("abc371_a", "PASSED"),
        ("abc371_a", "WRONG_ANSWER"),  # prints 3 for every input
        ("1", "PASSED"),
        ("1", "WRONG_ANSWER"),  # (0, 1) counts as [0, 1] on the first test, fails the second
        ("2051A", "PASSED"),  # prints 2.0 where 2 is expected: equal as Decimals
        ("3555", "PASSED"),  # List, heapify, heappop, heappush from lcb_runner's imports
        ("3555", "WRONG_ANSWER"),  # multiplies the first minimum it saw every time
        ("abc371_a", "PASSED"),  # reads `stdin`, from lcb_runner's `from sys import *`
    ]


def test_a_livecodebench_solution_may_use_what_lcb_runner_imports(tmp_path):
    """lcb_runner runs every program after its block of imports; a solution written for it
    (LeetCode 3555's uses `List` and heapq's functions unimported) passes here too, whether it
    reaches the sandbox through eval-samples or as a task's job, and one that imports what it
    uses itself still passes."""
    samples = [json.loads(line) for line in (FIXTURES / "livecodebench_samples.jsonl").open()]
    written_for_lcb = [s for s in samples if "import" not in s["solution"]][-3:]
    assert {s["task_id"] for s in written_for_lcb} == {"3555", "abc371_a"}
    results = _eval(written_for_lcb, spec("livecodebench"), tmp_path, "--workers", "1")
    assert [r["verdict"] for r in results] == ["PASSED", "WRONG_ANSWER", "PASSED"]
    task = next(t for t in load_benchmark(spec("livecodebench")) if t.id == "3555")
    solution = written_for_lcb[0]["solution"]
    with_imports = "from typing import List\nfrom heapq import *\n" + solution
    with Sandbox(workers=1) as sandbox:
        for program in (solution, with_imports):
            assert sandbox.run(Job.for_task(task, program, Limits())).passed


def test_a_completion_for_a_prose_prompt_is_its_fenced_code(tmp_path):
    program = "a, b = map(int, input().split())\nprint(a + b)\n"
    # lcb_runner's implicit imports: List and defaultdict without an import, as there
    leetcode = (
        "```python\nclass Solution:\n    def twoSum(self, nums: List[int], target: int):\n"
        "        seen = defaultdict(int)\n        for i, x in enumerate(nums):\n"
        "            if target - x in seen:\n                return [seen[target - x], i]\n"
        "            seen[x] = i\n```"
    )
    samples = [
        {"task_id": "abc371_a", "completion": f"Read both, add.\n```python\n{program}```\n"},
        {"task_id": "abc371_a", "completion": "I cannot solve this."},
        {"task_id": "1", "completion": leetcode},
    ]
    results = _eval(samples, spec("livecodebench"), tmp_path, "--workers", "1")
    assert [r["passed"] for r in results] == [True, False, True]


def test_per_problem_limits_reach_the_job():
    """CodeContests' 1.5 s and 256 MB, scaled (x2 time; memory floor 256 MiB), are the job's."""
    from execrl.rewards.scoring.grading import grading_jobs

    task = load_benchmark(spec("codecontests"))[0]
    (job,) = grading_jobs(task, "print(1)", None)
    assert job.limits.test_wall_s == 3.0
    assert job.limits.memory_mb == 256
    assert job.limits.wall_s == 3.0 * 4 + 1


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from execrl.models.loading.tiny import (
        TinyLlamaShape,
        new_llama,
        save_pretrained,
        train_bpe_tokenizer,
    )

    tokenizer = train_bpe_tokenizer(["print(input())\n", "def f(x):\n    return x\n"] * 5, 300)
    shape = TinyLlamaShape(hidden=32, layers=1, heads=2, kv_heads=1, intermediate=64)
    return save_pretrained(new_llama(tokenizer, shape, seed=0), tokenizer,
                           tmp_path_factory.mktemp("tiny"))  # fmt: skip


@pytest.mark.parametrize("name", ["livecodebench", *WITH_REFERENCES])
def test_eval_generates_and_grades_each_benchmark(name, tiny_model, tmp_path, capsys):
    """`execrl eval` end to end: a (random) tiny model's samples are graded, none passes."""
    out = tmp_path / "eval"
    args = ["eval", "--model", str(tiny_model), "--benchmark", spec(name), "-n", "1",
            "--max-new-tokens", "4", "--out-dir", str(out), "--workers", "1", "--json"]  # fmt: skip
    assert main(args) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["n_tasks"] == len(load_benchmark(spec(name)))
    assert summary["pass@1"] == 0.0
    assert len((out / "results.jsonl").read_text().splitlines()) == summary["n_tasks"]


def test_train_on_a_contest_benchmark(tiny_model, tmp_path, capsys):
    """data.train names a contest file as any benchmark: one RL step on CodeContests' fixture."""
    small = [f"model.path={str(tiny_model)!r}", f"data.train={spec('codecontests')!r}",
             "data.heldout=''", "data.n_train=2", "run.steps=1", "rl.group_size=2",
             "rl.groups_per_step=2", "sampling.max_new_tokens=4", "sandbox.workers=1",
             f"run.out_dir={str(tmp_path)!r}", "run.name='cc'"]  # fmt: skip
    assert main(["train", *sum((["--set", s] for s in small), [])]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["steps"] == 1


def test_kodcode_pytest_shim_fails_wrong_programs(tmp_path):
    """pytest.raises, approx, file fixtures and `import solution`, each able to fail."""
    good = "def safe_divide(a, b):\n    if b == 0:\n        raise ValueError('zero')\n    return a / b\n"
    no_raise = "def safe_divide(a, b):\n    return a / b if b else 0\n"
    wrong_message = "def safe_divide(a, b):\n    if b == 0:\n        raise ValueError('nope')\n    return a / b\n"
    off = "def safe_divide(a, b):\n    if b == 0:\n        raise ValueError('zero')\n    return a / b + 1e-4\n"
    samples = [
        {"task_id": "Apps_12_I", "solution": p} for p in (good, no_raise, wrong_message, off)
    ]
    results = _eval(samples, spec("kodcode"), tmp_path, "--workers", "1")
    assert [r["passed"] for r in results] == [True, False, False, False]
    failed = [[t["index"] for t in r["tests"] if t["verdict"] != "PASSED"] for r in results]
    # statements: test_third (approx, fixture), test_zero (raises), test_module_style
    assert failed == [[], [1], [1], [0, 2]]
