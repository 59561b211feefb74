"""One rollout path (issue 30): every rollout is an episode of the run's environment, built by
`rl.rollout.episode_sources.episode_source` and run in chunks by `rl.rollout.rollouts.Rollouts`;
"single" is the one-turn environment that `execrl train` and its held-out evaluation reach; two runs
of the same command are compared field by field by benchmarks/same_runs.py."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import torch

from execrl.cli import main
from execrl.models.engines.sampling import Completion, SamplingParams
from execrl.models.loading.tiny import train_bpe_tokenizer
from execrl.rewards.scoring.scorer import RewardScorer
from execrl.rl.episodes import EnvConfig, Observation, StepInfo, StepResult
from execrl.rl.episodes.builtin import Single
from execrl.rl.rollout import episode_sources
from execrl.rl.rollout.episode_sources import EnvSource, episode_source
from execrl.rl.rollout.rollouts import Rollouts, RolloutTimes

from .conftest import CORPUS, LetterE, tasks

ROOT = Path(__file__).resolve().parents[2]


class Scripted:
    """A rollout engine that answers every prompt with the next of `texts`, in turn."""

    name = "scripted"

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts

    def generate(self, prompt_ids, params, *, n):
        count = len(prompt_ids) * n
        return [Completion(i // n, self.texts[i % len(self.texts)],
                           torch.tensor(prompt_ids[i // n]), torch.tensor([1, 2]),
                           torch.zeros(2), "eos") for i in range(count)]  # fmt: skip

    def sync_weights(self, model):
        return None

    def close(self):
        return None


def test_the_one_turn_source_grades_a_chunk_as_the_single_environment_grades_a_step():
    """LetterE scores the fraction of 'e': "eeee" 1.0, "ex" 0.5, by hand; a chunk of two tasks,
    groups of two, graded on the scoring thread, gives each episode what `Single.step` gives."""
    scorer = RewardScorer(reward=LetterE())
    work = tasks(2)
    tokenizer = train_bpe_tokenizer(CORPUS, vocab_size=300)
    source = episode_source(EnvConfig(), Scripted(["eeee", "ex"]), tokenizer, work, scorer,
                            SamplingParams(), chat=False)  # fmt: skip
    assert isinstance(source, EnvSource)
    rollouts = Rollouts(source, seed=0, groups_per_generate=2)
    try:
        groups = rollouts.run([(0, [0, 1])], 2, 0, 0, RolloutTimes())[0]
    finally:
        rollouts.close()
    assert [[x.score for x in g] for g in groups] == [[1.0, 0.5], [1.0, 0.5]]
    # an episode with one turn, every completion token the policy's
    assert all(x.turns.ends == (1,) and x.policy_tokens == 2 and x.task_index == i
               for i, g in enumerate(groups) for x in g)  # fmt: skip
    assert [x.completion.text for x in groups[0]] == ["eeee", "ex"]  # the answers themselves
    env = Single(EnvConfig(), scorer)
    env.reset(work[0])
    assert [env.step("eeee").reward, env.step("ex").reward] == [1.0, 0.5]


def test_a_chunk_of_two_languages_stops_each_row_on_a_block_in_its_own():
    """A task mix's chunk (python and sql) is one engine call per language, each with that
    language's stop rule (`SamplingParams.code_language`); the episodes come back in the
    chunk's order, as one call would give them, and are graded against their own tasks."""
    import dataclasses

    calls: list[tuple[str, list[list[int]]]] = []

    class Recording(Scripted):
        def generate(self, prompt_ids, params, *, n):
            calls.append((params.code_language, [list(p) for p in prompt_ids]))
            done = super().generate(prompt_ids, params, n=n)
            return [dataclasses.replace(c, text=f"{params.code_language}{c.prompt_index}")
                    for c in done]  # fmt: skip

    work = tasks(3)
    work[1] = dataclasses.replace(work[1], language="sql")
    tokenizer = train_bpe_tokenizer(CORPUS, vocab_size=300)
    source = episode_source(EnvConfig(), Recording(["e"]), tokenizer, work,
                            RewardScorer(reward=LetterE()), SamplingParams(), chat=False)  # fmt: skip
    grading = source.generate([0, 1, 2], 2)
    assert [language for language, _ in calls] == ["python", "sql"]
    assert [len(prompts) for _, prompts in calls] == [2, 1]  # each prompt once, sampled twice
    groups = grading(RolloutTimes())
    assert [g[0].task_index for g in groups] == [0, 1, 2]
    assert [[x.completion.text for x in g] for g in groups] == [
        ["python0", "python0"], ["sql0", "sql0"], ["python1", "python1"]]  # fmt: skip
    (_, python), (_, sql) = calls
    assert [g[0].completion.prompt_ids.tolist() for g in groups] == [python[0], sql[0], python[1]]
    calls.clear()
    source.generate([0, 2], 2)  # one language: one call, as before
    assert [language for language, _ in calls] == ["python"]


def test_every_environment_single_included_rolls_out_through_the_one_source():
    scorer = RewardScorer(reward=LetterE())
    tokenizer = train_bpe_tokenizer(CORPUS, vocab_size=300)
    for name in ("single", "self_correct", "tool", "my_envs:Letters"):
        source = episode_source(EnvConfig(name=name), Scripted(["x"]), tokenizer, tasks(1),
                                scorer, SamplingParams(code_end=True), chat=False)  # fmt: skip
        assert isinstance(source, EnvSource)
        # a code block's end stops a turn only where the turn is the whole answer
        assert source.params.code_end == (name == "single") == (not EnvConfig(name=name).by_turn)
    assert not hasattr(Rollouts(source, 0, 1), "episodes")  # given at construction, not after


def test_execrl_train_and_its_heldout_evaluation_grade_through_the_single_environment(
    tiny_model_dir, tmp_path, monkeypatch
):
    graded: list[int] = []
    original = Single.step_together

    def counted(envs, turns):
        graded.append(len(turns))
        return original(envs, turns)

    monkeypatch.setattr(Single, "step_together", staticmethod(counted))
    settings = [f"model.path={str(tiny_model_dir)!r}", f"run.out_dir={str(tmp_path)!r}",
                "run.name='one'", "data.n_train=4", "data.n_heldout=2", "data.heldout_samples=1",
                "run.steps=1", "rl.group_size=2", "rl.groups_per_step=2",
                "rl.dynamic_sampling=false", "sampling.max_new_tokens=6",
                "sandbox.workers=1"]  # fmt: skip
    assert main(["train", *sum((["--set", s] for s in settings), [])]) == 0
    # held-out before (2 tasks x 1 sample), the step (2 groups of 2), held-out after: each
    # chunk's answers graded in one call
    assert graded == [2, 4, 2]
    summary = json.loads((tmp_path / "one" / "summary.json").read_text())
    assert "heldout_pass@1_by_turn_after" not in summary  # one turn: nothing by turn


def _run(directory: Path, rows: list[dict], summary: dict) -> Path:
    directory.mkdir()
    (directory / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (directory / "summary.json").write_text(json.dumps(summary))
    return directory


def test_same_runs_ignores_timings_and_names_every_field_that_differs(tmp_path):
    row = {"step": 0, "reward_mean": 0.5, "loss": 0.1}
    before = _run(tmp_path / "a", [{**row, "time/generate_s": 1.0, "exec_per_s": 3.0}],
                  {"heldout_pass@1_after": 0.25, "seconds": 10.0, "run_dir": "a"})  # fmt: skip
    same = _run(tmp_path / "b", [{**row, "time/generate_s": 2.0, "exec_per_s": 9.0}],
                {"heldout_pass@1_after": 0.25, "seconds": 12.0, "run_dir": "b"})  # fmt: skip
    other = _run(tmp_path / "c", [{**row, "loss": 0.10000001}],
                 {"heldout_pass@1_after": 0.3125})  # fmt: skip
    script = [sys.executable, str(ROOT / "benchmarks" / "same_runs.py")]
    done = subprocess.run([*script, str(before), str(same)], capture_output=True, text=True)
    assert done.returncode == 0 and "1 steps, the same run" in done.stdout
    done = subprocess.run([*script, str(before), str(other)], capture_output=True, text=True)
    assert done.returncode == 1
    assert "step 0: loss 0.1 -> 0.10000001" in done.stdout
    assert "summary.json: heldout_pass@1_after 0.25 -> 0.3125" in done.stdout


class Drawn:
    """A rollout engine whose answers come from torch's generator: 1-4 letters 'e' each, so
    any mix-up of the chunks' RNG states changes what is drawn. Logs each generate call."""

    name = "drawn"

    def __init__(self, log: list[tuple[str, int]]) -> None:
        self.log = log

    def generate(self, prompt_ids, params, *, n):
        self.log.append(("generate", len(prompt_ids[0])))
        out = []
        for i in range(len(prompt_ids) * n):
            k = int(torch.randint(1, 5, ()).item())
            out.append(Completion(i // n, "e" * k, torch.tensor(prompt_ids[i // n]),
                                  torch.full((k,), 7), torch.zeros(k), "eos"))  # fmt: skip
        return out

    def sync_weights(self, model):
        return None

    def close(self):
        return None


class TwoTurns:
    """Two turns, each worth the number of letters written; a task named in `slow` steps late."""

    name = "two_turns"

    def __init__(self, log: list[tuple[str, int]], slow: str) -> None:
        self.log, self.slow, self.turn, self.task = log, slow, 0, None

    def reset(self, task):
        self.turn, self.task = 0, task
        return Observation(task.prompt, task.prompt)

    def step(self, model_output):
        self.turn += 1
        if self.task.id == self.slow:
            time.sleep(0.3)
        self.log.append((f"stepped {self.task.id}", self.turn))
        if self.turn == 2:
            return StepResult(None, float(len(model_output)), True, StepInfo(2))
        return StepResult(Observation("again", " again:"), 0.0, False, StepInfo(1))


def _two_chunks(order: list[int], monkeypatch) -> tuple[list[list[float]], list]:
    """Chunks 0 and 1 (one task each, groups of two), generated first in `order`; task t0's
    environments step late."""
    log: list[tuple[str, int]] = []
    monkeypatch.setattr(episode_sources, "make_env", lambda config, scorer: TwoTurns(log, "t0"))
    tokenizer = train_bpe_tokenizer(CORPUS, vocab_size=300)
    source = EnvSource(EnvConfig(name="my_envs:TwoTurns"), RewardScorer(reward=LetterE()),
                       Drawn(log), tokenizer, tasks(2), SamplingParams(), chat=False)  # fmt: skip
    rollouts = Rollouts(source, seed=3, groups_per_generate=1)
    try:
        done = rollouts.run([(c, [c]) for c in order], 2, 0, 0, RolloutTimes())
    finally:
        rollouts.close()
    return [[x.score for x in done[c][0]] for c in (0, 1)], log


def test_a_chunks_turns_draw_the_same_whichever_chunk_goes_first(monkeypatch):
    """Two chunks of two-turn episodes: while the first chunk's environments step, the second
    chunk's first turn generates; each chunk keeps its own RNG between its turns, so what is
    drawn does not depend on the order the chunks' turns come in."""
    forward, log = _two_chunks([0, 1], monkeypatch)
    backward, _ = _two_chunks([1, 0], monkeypatch)
    assert forward == backward
    assert all(score in (1.0, 2.0, 3.0, 4.0) for group in forward for score in group)
    # chunk 1's first turn generated before chunk 0's first turn had stepped
    assert [x[0] for x in log[:3]] == ["generate", "generate", "stepped t0"]


def test_a_process_left_without_a_chunk_is_said_at_start():
    """Under torchrun each process generates its share of a step's chunks (round-robin): with
    fewer chunks than processes some devices idle through every first sampling round."""
    from execrl.rl.rollout.rollouts import gather_chunks, idle_processes

    assert idle_processes(8, 8, 1) == "" and idle_processes(8, 2, 4) == ""
    said = idle_processes(8, 8, 4)  # one chunk of 8 groups, four processes
    assert "3 of 4 processes generate nothing" in said and "set it to 2 or less" in said
    assert [gather_chunks(1, rank, 4) for rank in range(4)] == [[0], [], [], []]
    assert "1 of 4 processes" in idle_processes(6, 2, 4)  # 3 chunks for 4 processes
