"""Every path that builds a Job grades a task in the task's language (issue 15, item 8): a Python
program answering a C task is compiled as C (and fails), never run as Python (where it would
pass). One test per path: the reward scorer (which the TRL and verl adapters call), training
rollouts, `execrl eval` / `eval-samples` (`eval.evaluate`), `execrl tasks validate`."""

from __future__ import annotations

import pytest
import torch

from execrl.eval.evaluate import evaluate
from execrl.eval.samples import Sample as EvalSample
from execrl.eval.validate import validate
from execrl.models.engines.sampling import Completion, SamplingParams
from execrl.rewards import RewardConfig, RewardScorer
from execrl.rl.episodes import EnvConfig
from execrl.rl.rollout.episode_sources import episode_source
from execrl.rl.rollout.rollouts import Rollouts, RolloutTimes
from execrl.sandbox import Sandbox
from execrl.sandbox.grading.languages import probe_languages
from execrl.tasks import StdioCase, StdioTests, Task

PYTHON_ECHO = "print(input())\n"  # right in Python, not C
C_ECHO = (
    '#include <stdio.h>\nint main(void) { char s[64]; scanf("%63s", s); printf("%s\\n", s); }\n'
)

pytestmark = pytest.mark.skipif(
    not any(s.name == "c" and s.available for s in probe_languages()), reason="no C compiler"
)


def c_task(reference: str | None = None) -> Task:
    tests = StdioTests((StdioCase("abc\n", "abc\n"), StdioCase("xy\n", "xy\n")))
    return Task(id="echo_c", prompt="Echo the word, in C.", tests=tests, reference=reference,
                language="c")  # fmt: skip


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(workers=1) as sb:
        yield sb


def test_the_reward_scorer_grades_a_c_task_as_c(sandbox):
    scorer = RewardScorer(RewardConfig(tree={"type": "pass"}, analysis_workers=0), sandbox)
    (x,) = scorer.score_samples([c_task()], [PYTHON_ECHO])
    assert x.sample.result is not None and not x.sample.result.passed
    assert x.reward.score == 0.0


class OneCompletion:
    """A rollout engine that always answers the same text."""

    name = "fixed"

    def generate(self, prompt_ids, params, *, n):
        ids = torch.tensor([1, 2])
        return [Completion(i // n, PYTHON_ECHO, torch.tensor(prompt_ids[i // n]), ids,
                           torch.zeros(2), "eos") for i in range(len(prompt_ids) * n)]  # fmt: skip

    def sync_weights(self, model):
        return None

    def close(self):
        return None


class SamePrompt:
    """A tokenizer that gives every prompt the same ids (the engine above reads none)."""

    def encode(self, text, add_special_tokens=True):
        return [5, 6]


def test_training_rollouts_grade_a_c_task_as_c(sandbox):
    scorer = RewardScorer(RewardConfig(tree={"type": "pass"}, analysis_workers=0), sandbox)
    source = episode_source(EnvConfig(), OneCompletion(), SamePrompt(), [c_task()], scorer,
                            SamplingParams(), chat=False)  # fmt: skip
    rollouts = Rollouts(source, seed=0, groups_per_generate=1)
    try:
        groups = rollouts.run([(0, [0])], 2, 0, 0, RolloutTimes())
    finally:
        rollouts.close()
    assert [s.passed for s in groups[0][0]] == [False, False]


def test_eval_samples_grades_a_c_task_as_c(sandbox):
    task = c_task()
    python, c = (
        EvalSample("echo_c", code, f"s.jsonl:{i}", {})
        for i, code in enumerate([PYTHON_ECHO, C_ECHO])
    )
    results = evaluate([python, c], [task], "solution", sandbox)
    assert [r.passed for r in results] == [False, True]


def test_tasks_validate_grades_a_c_reference_as_c():
    failures = validate([c_task(PYTHON_ECHO)], workers=1, progress=False)
    assert [f.task_id for f in failures] == ["echo_c"]
    assert validate([c_task(C_ECHO)], workers=1, progress=False) == []


def test_sandbox_bench_grades_a_c_reference_as_c(tmp_path):
    import json
    import subprocess
    import sys

    from execrl.tasks.jsonl import write_tasks

    path = tmp_path / "c.jsonl"
    write_tasks(path, [c_task(PYTHON_ECHO)])
    command = [sys.executable, "-m", "execrl.cli", "sandbox", "bench", "--json", "--repeat", "1",
               "--workers", "1", "--benchmark", f"jsonl:{path}"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert done.returncode == 1 and out["all_passed"] is False, done.stdout + done.stderr
    write_tasks(path, [c_task(C_ECHO)])
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and json.loads(done.stdout.strip().splitlines()[-1])["all_passed"]
