"""Rollouts: sample groups of completions with the rollout engine, score them with the rewards
layer's one scoring path (`RewardScorer.score_samples`).

Generation goes in chunks of `groups_per_generate` prompts; while the engine generates chunk k+1,
a background thread has the scorer execute and score chunk k (torch releases the GIL in its
kernels). Each chunk's sampling RNG is seeded from (seed, step, round, chunk), so results depend
neither on how many processes share the work nor on whether the run was resumed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import torch

from execrl.models.engine import RolloutEngine
from execrl.models.sampling import Completion, SamplingParams
from execrl.rewards.result import RewardResult
from execrl.rewards.sample import Sample
from execrl.rewards.scorer import RewardScorer
from execrl.sandbox.grading.verdict import ExecutionResult
from execrl.tasks.schema import Task


@dataclass(frozen=True, slots=True)
class Turns:
    """A multi-turn episode laid over its completion: every token after the first prompt, the
    policy's turns and the environment's (feedback, tool output) interleaved."""

    policy_mask: torch.Tensor  # (T,) 1 on the policy's tokens, 0 on the environment's
    ends: tuple[int, ...]  # each policy turn's last token, an index into the T tokens
    rewards: tuple[float, ...]  # each policy turn's reward, undiscounted
    discount: float  # env.turn_discount
    passed_by_turn: tuple[bool, ...]  # the hidden tests on the answer standing after each turn
    tool_calls: int = 0


@dataclass(frozen=True, slots=True)
class Segment:
    """Another token-exact sequence of the same episode: a harness that rewrote its history
    (cut it, summarised it, started a sub-agent) made calls that do not extend the episode's
    main sequence. Trained with the episode's advantage (`Learner._segment_batches`)."""

    prompt_ids: torch.Tensor  # (P,) the segment's first prompt
    token_ids: torch.Tensor  # (T,) everything after it, the policy's and the harness's
    logprobs: torch.Tensor  # (T,) behaviour log pi on the policy's tokens, 0 elsewhere
    policy_mask: torch.Tensor  # (T,) 1 on the policy's tokens


@dataclass(frozen=True, slots=True)
class Scored:
    """One completion (or one episode: `turns`) with its program, execution result and reward.
    For an episode, `reward.score` is its discounted return and `sample` its final answer."""

    task_index: int
    completion: Completion
    reward: RewardResult
    sample: Sample  # the program built from the completion and what its run said
    turns: Turns | None = None  # None: one turn, every completion token the policy's
    segments: tuple[Segment, ...] = ()  # an episode's other sequences (a rewritten history)

    @property
    def policy_tokens(self) -> int:
        """The tokens the policy wrote (the loss's tokens before masking), in every segment."""
        if self.turns is None:
            return self.completion.n_tokens
        own = int(self.turns.policy_mask.sum())
        return own + sum(int(s.policy_mask.sum()) for s in self.segments)

    @property
    def environment_tokens(self) -> int:
        """The tokens the environment (or a harness) added after the first prompt."""
        every = self.completion.n_tokens + sum(len(s.token_ids) for s in self.segments)
        return every - self.policy_tokens

    def policy_mask(self) -> torch.Tensor:
        """(T,) 1 where the policy wrote the token."""
        if self.turns is None:
            return torch.ones(self.completion.n_tokens)
        return self.turns.policy_mask.float()

    @property
    def score(self) -> float:
        return self.reward.score

    @property
    def valid(self) -> bool:
        """Not masked by the reward (SANDBOX_ERROR, reward-model outage) and finite."""
        return not self.reward.masked and math.isfinite(self.reward.score)

    @property
    def result(self) -> ExecutionResult | None:
        return self.sample.result

    @property
    def passed(self) -> bool:
        return self.result is not None and self.result.passed

    @property
    def verdict(self) -> str:
        return "NOT_RUN" if self.result is None else str(self.result.verdict)


@dataclass(slots=True)
class RolloutTimes:
    generate_s: float = 0.0
    execute_s: float = 0.0  # sandbox busy time (overlaps generation)
    wait_s: float = 0.0  # time generation waited for the sandbox at the end
    executions: int = 0
    latencies: list[float] = field(default_factory=list)  # wall seconds of each execution


def token_offsets(tokenizer: Any, token_ids: list[int], text: str) -> tuple[tuple[int, int], ...]:
    """(start, end) characters of `text` that each generated token wrote: the decoded length
    before and after it. Tokens past the end of `text` (a stop sequence cut from it) get an
    empty span at the end. Decoding the ids, not re-tokenizing the text, keeps exactly one
    span per token: a re-tokenization can split the text differently."""
    spans = []
    before = 0
    for i in range(len(token_ids)):
        after = min(len(text), len(tokenizer.decode(token_ids[: i + 1])))
        after = max(after, before)  # a partial UTF-8 character decodes short: no negative span
        spans.append((before, after))
        before = after
    return tuple(spans)


class Rollouts:
    """Generates and scores groups: `engine` samples, `scorer` builds, runs and rewards."""

    def __init__(self, engine: RolloutEngine, tokenizer: Any, tasks: list[Task],
                 prompt_ids: list[list[int]], scorer: RewardScorer, params: SamplingParams,
                 seed: int, groups_per_generate: int) -> None:  # fmt: skip
        self.engine, self.tokenizer, self.tasks = engine, tokenizer, tasks
        self.prompt_ids = prompt_ids  # per task: list[int]
        self.scorer, self.params = scorer, params
        self.seed, self.chunk = seed, groups_per_generate
        self.offsets = scorer.config.token_credit.enabled  # token credit maps lines to tokens
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="execrl-sandbox")
        # Multi-turn episodes (`[env]` other than "single"): chunk -> groups of episodes
        self.episodes: Callable[[list[int], int], list[list[Scored]]] | None = None

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
                if self.episodes is not None:  # the environment grades as the episode runs
                    done: Future = Future()
                    done.set_result(self.episodes(tasks, group_size))
                    pending.append((chunk_id, done))
                    times.generate_s += time.perf_counter() - start
                    continue
                completions = self.engine.generate(
                    [self.prompt_ids[t] for t in tasks], self.params, n=group_size
                )
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
        offsets = (
            [token_offsets(self.tokenizer, c.token_ids.tolist(), c.text) for c in completions]
            if self.offsets
            else None
        )
        scored = self.scorer.score_samples(
            [self.tasks[tasks[c.prompt_index]] for c in completions],
            [c.text for c in completions],
            offsets=offsets,
            n_tokens=[c.n_tokens for c in completions],
        )
        for x in scored:
            if x.sample.result is not None and x.sample.program is not None:
                times.latencies.append(x.sample.result.wall_s)
                times.executions += 1
        times.execute_s += time.perf_counter() - start
        out = [
            Scored(tasks[c.prompt_index], c, x.reward, x.sample)
            for c, x in zip(completions, scored, strict=True)
        ]
        return [out[g * group_size : (g + 1) * group_size] for g in range(len(tasks))]


def _chunk_seed(seed: int, step: int, round_: int, chunk: int) -> int:
    return (seed * 1_000_003 + step * 10_007 + round_ * 101 + chunk) % (2**63)


def gather_chunks(n_chunks: int, rank: int, world: int) -> list[int]:
    """The chunk ids this process generates: round-robin over processes."""
    return list(range(rank, n_chunks, world))
