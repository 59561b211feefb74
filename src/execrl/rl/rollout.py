"""Rollouts: sample groups of completions, run them in the sandbox, score them with a reward.

Generation goes in chunks of `groups_per_generate` prompts; while the model generates chunk k+1,
a background thread has the sandbox execute chunk k (torch releases the GIL in its kernels).
Each chunk's sampling RNG is seeded from (seed, step, round, chunk), so results depend neither on
how many processes share the work nor on whether the run was resumed.
"""

from __future__ import annotations

import math
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import torch

from execrl.models.prompting import is_code_prompt
from execrl.models.sampling import Completion, SamplingParams, sample
from execrl.rewards.extract import defines, extract_code
from execrl.rewards.result import Flag, RewardResult
from execrl.rewards.sample import Sample
from execrl.sandbox import Job, Limits
from execrl.sandbox.verdict import ExecutionResult, Verdict
from execrl.tasks.schema import Task


@dataclass(frozen=True, slots=True)
class Scored:
    """One completion with its execution result and reward."""

    task_index: int
    completion: Completion
    reward: RewardResult
    result: ExecutionResult | None  # None: no code to run
    program: str | None

    @property
    def score(self) -> float:
        return self.reward.score

    @property
    def valid(self) -> bool:
        return not self.reward.masked and math.isfinite(self.reward.score)

    @property
    def passed(self) -> bool:
        return self.result is not None and self.result.passed

    @property
    def verdict(self) -> str:
        return "NO_CODE" if self.result is None else str(self.result.verdict)


@dataclass(slots=True)
class RolloutTimes:
    generate_s: float = 0.0
    execute_s: float = 0.0  # sandbox busy time (overlaps generation)
    wait_s: float = 0.0  # time generation waited for the sandbox at the end
    executions: int = 0
    latencies: list[float] = field(default_factory=list)  # wall seconds of each execution


def build_sample(task: Task, text: str, n_tokens: int) -> Sample:
    """The program a completion stands for: the prompt followed by the completion when the
    prompt is code that the completion continues (HumanEval style) and the completion does not
    define the entry point itself; otherwise the code extracted from the completion."""
    continues = is_code_prompt(task.prompt) and not (
        task.entry_point and defines(text, task.entry_point)
    )
    if continues:
        return Sample(
            task, text, task.prompt + text, task.prompt, (0, len(text)), n_tokens=n_tokens
        )
    found = extract_code(text, task.entry_point)
    if found is None:
        return Sample(task, text, None, n_tokens=n_tokens)
    return Sample(task, text, found.code, "", (found.start, found.end), n_tokens=n_tokens)


class Rollouts:
    def __init__(self, model, tokenizer, tasks, prompt_ids, reward, sandbox, params: SamplingParams,
                 limits: Limits, seed: int, groups_per_generate: int) -> None:  # fmt: skip
        self.model, self.tokenizer, self.tasks = model, tokenizer, tasks
        self.prompt_ids = prompt_ids  # per task: list[int]
        self.reward, self.sandbox, self.params, self.limits = reward, sandbox, params, limits
        self.seed, self.chunk = seed, groups_per_generate
        self.needs_execution = bool(
            {"hidden", "visible"} & set(getattr(reward, "needs", {"hidden"}))
        )
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="execrl-sandbox")

    def close(self) -> None:
        self.pool.shutdown(wait=True)

    def chunks(self, task_indices: list[int]) -> list[list[int]]:
        return [task_indices[i : i + self.chunk] for i in range(0, len(task_indices), self.chunk)]

    def run(self, chunks: list[tuple[int, list[int]]], group_size: int, step: int, round_: int,
            times: RolloutTimes) -> dict[int, list[list[Scored]]]:  # fmt: skip
        """Generate and score the given (chunk id, task indices); chunk id -> groups."""
        pending: list[tuple[int, Future]] = []
        for chunk_id, tasks in chunks:
            start = time.perf_counter()
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(_chunk_seed(self.seed, step, round_, chunk_id))
                if torch.cuda.is_available():
                    torch.cuda.manual_seed_all(_chunk_seed(self.seed, step, round_, chunk_id))
                completions = sample(self.model, self.tokenizer, [self.prompt_ids[t] for t in tasks],
                                     self.params, n=group_size)  # fmt: skip
            times.generate_s += time.perf_counter() - start
            pending.append(
                (chunk_id, self.pool.submit(self._score, tasks, completions, group_size, times))
            )
        out = {}
        wait_start = time.perf_counter()
        for chunk_id, future in pending:
            out[chunk_id] = future.result()
        times.wait_s += time.perf_counter() - wait_start
        return out

    def _score(self, tasks: list[int], completions: list[Completion], group_size: int,
               times: RolloutTimes) -> list[list[Scored]]:  # fmt: skip
        start = time.perf_counter()
        samples = [
            build_sample(self.tasks[tasks[c.prompt_index]], c.text, c.n_tokens) for c in completions
        ]
        runnable = [i for i, s in enumerate(samples) if s.program is not None]
        results: dict[int, ExecutionResult] = {}
        if self.needs_execution and runnable:
            jobs = [
                Job(
                    program=samples[i].program,
                    tests=samples[i].task.tests,
                    entry_point=samples[i].task.entry_point,
                    limits=self.limits,
                    id=f"{samples[i].task.id}#{i}",
                )  # fmt: skip
                for i in runnable
            ]
            for i, r in zip(runnable, self.sandbox.run_many(jobs), strict=True):
                results[i] = r
                times.latencies.append(r.wall_s)
            times.executions += len(jobs)
        scored = []
        for i, (c, s) in enumerate(zip(completions, samples, strict=True)):
            result = results.get(i)
            if result is not None:
                s = Sample(
                    s.task,
                    s.completion,
                    s.program,
                    s.prefix,
                    s.code_span,
                    result,
                    n_tokens=s.n_tokens,
                )
            scored.append(Scored(tasks[c.prompt_index], c, self._reward(s), result, s.program))
        times.execute_s += time.perf_counter() - start
        return [scored[g * group_size : (g + 1) * group_size] for g in range(len(tasks))]

    def _reward(self, s: Sample) -> RewardResult:
        if self.needs_execution and (s.program is None or s.result is None):
            return RewardResult(0.0, {}, flags=frozenset({Flag.NO_CODE}), reason="no code found")
        if s.result is not None and s.result.verdict is Verdict.SANDBOX_ERROR:
            return RewardResult(0.0, {}, masked=True, flags=frozenset({Flag.SANDBOX_ERROR}),
                                reason=f"sandbox error: {s.result.message}")  # fmt: skip
        return self.reward(s)


def _chunk_seed(seed: int, step: int, round_: int, chunk: int) -> int:
    return (seed * 1_000_003 + step * 10_007 + round_ * 101 + chunk) % (2**63)


def gather_chunks(n_chunks: int, rank: int, world: int) -> list[int]:
    """The chunk ids this process generates: round-robin over processes."""
    return list(range(rank, n_chunks, world))


def to_summary(groups: list[list[Scored]]) -> list[dict[str, Any]]:
    """Small, picklable facts about groups, shared across processes to decide what is kept."""
    return [
        {
            "task": g[0].task_index,
            "scores": [s.score for s in g],
            "valid": [s.valid for s in g],
            "passed": [s.passed for s in g],
            "n_tokens": [s.completion.n_tokens for s in g],
            "truncated": [s.completion.truncated for s in g],
            "verdicts": [s.verdict for s in g],
            "flags": [sorted(str(f) for f in s.reward.flags) for s in g],
        }
        for g in groups
    ]
