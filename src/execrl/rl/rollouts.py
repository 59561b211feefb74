"""The one rollout path: groups of episodes of any environment, generated and graded in chunks.

Every rollout is an episode of the run's environment (`[env]`; "single", one turn, by default).
`Rollouts` splits the tasks into chunks of `groups_per_generate` prompts and asks the
environment's source (`rl.episode_sources`) to generate each chunk; what is left to grade runs on
a background thread while the next chunk generates (torch releases the GIL in its kernels). A
one-turn chunk leaves its whole grading to that thread; a multi-turn chunk grades each turn as
its episodes run, since the next turn depends on it. Each chunk's sampling RNG is seeded from
(seed, step, round, chunk), so results depend neither on how many processes share the work nor
on whether the run was resumed. Training (`rl.groups`), the rollout thread of an asynchronous
run (`rl.prefetch`), held-out evaluation and `execrl eval --model RUN/final`
(`rl.eval_spec.run_heldout`) all go through it.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import torch

from execrl.rl.episode_sources import EpisodeSource
from execrl.rl.scored import Scored


@dataclass(slots=True)
class RolloutTimes:
    generate_s: float = 0.0
    execute_s: float = 0.0  # sandbox busy time (overlaps generation)
    wait_s: float = 0.0  # time generation waited for the sandbox at the end
    executions: int = 0
    latencies: list[float] = field(default_factory=list)  # wall seconds of each execution


class Rollouts:
    """Generates and grades groups of episodes: `source` rolls out a chunk of tasks."""

    def __init__(self, source: EpisodeSource, seed: int, groups_per_generate: int) -> None:
        self.source, self.seed, self.chunk = source, seed, groups_per_generate
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="execrl-sandbox")

    def close(self) -> None:
        self.pool.shutdown(wait=True)

    def chunks(self, task_indices: list[int]) -> list[list[int]]:
        return [task_indices[i : i + self.chunk] for i in range(0, len(task_indices), self.chunk)]

    def run(self, chunks: list[tuple[int, list[int]]], group_size: int, step: int, round_: int,
            times: RolloutTimes) -> dict[int, list[list[Scored]]]:  # fmt: skip
        """Generate and grade the given (chunk id, task indices); chunk id -> groups."""
        pending: list[tuple[int, Future]] = []
        for chunk_id, tasks in chunks:
            start = time.perf_counter()
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(_chunk_seed(self.seed, step, round_, chunk_id))
                if torch.cuda.is_available():
                    torch.cuda.manual_seed_all(_chunk_seed(self.seed, step, round_, chunk_id))
                grade = self.source.generate(tasks, group_size)
            times.generate_s += time.perf_counter() - start
            pending.append((chunk_id, self.pool.submit(grade, times)))
        out = {}
        wait_start = time.perf_counter()
        for chunk_id, future in pending:
            out[chunk_id] = future.result()
        times.wait_s += time.perf_counter() - wait_start
        return out


def _chunk_seed(seed: int, step: int, round_: int, chunk: int) -> int:
    return (seed * 1_000_003 + step * 10_007 + round_ * 101 + chunk) % (2**63)


def gather_chunks(n_chunks: int, rank: int, world: int) -> list[int]:
    """The chunk ids this process generates: round-robin over processes."""
    return list(range(rank, n_chunks, world))
