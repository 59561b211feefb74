"""The one rollout path: groups of episodes of any environment, generated and graded in chunks.

Every rollout is an episode of the run's environment (`[env]`; "single", one turn, by default).
`Rollouts` splits the tasks into chunks of `groups_per_generate` prompts and asks the
environment's source (`rl.rollout.episode_sources`) to generate each chunk; what is left to grade
runs on a background thread while the engine generates the next chunk (torch releases the GIL in its
kernels). A one-turn chunk is then done; a multi-turn chunk comes back with its next turn
(`NextTurn`), which this thread generates as soon as it is free, so one chunk's environments step
while another's turn generates. Each chunk's sampling RNG is seeded from (seed, step, round, chunk)
and kept between its turns, so results depend neither on how many processes share the work, nor on
which grading ends first, nor on whether the run was resumed. Training (`rl.rollout.groups`), the
rollout thread of an asynchronous run (`rl.prefetch`), held-out evaluation and `execrl eval --model
RUN/final` (`rl.eval_spec.run_heldout`) all go through it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from functools import partial

import torch

from execrl.rl.rollout.episode_sources import EpisodeSource, Grading, NextTurn, RolloutTimes
from execrl.rl.rollout.scored import Scored


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
        """Generate and grade the given (chunk id, task indices); chunk id -> groups. A chunk
        whose episodes go on after a graded turn (`NextTurn`) generates it when this thread
        gets back to it, under the chunk's own RNG: the draws are those of one chunk after
        another, whichever grading ends first."""
        running: dict[Future, tuple[int, RngState]] = {}
        rngs = {}
        for chunk_id, tasks in chunks:
            rng = rngs[chunk_id] = RngState.seeded(_chunk_seed(self.seed, step, round_, chunk_id))
            grade = _generate(rng, partial(self.source.generate, tasks, group_size), times)
            running[self.pool.submit(grade, times)] = (chunk_id, rng)
        out = {}
        wait_start, generating = time.perf_counter(), times.generate_s
        while running:
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in sorted(done, key=lambda f: running[f][0]):
                chunk_id, rng = running.pop(future)
                graded = future.result()
                if isinstance(graded, NextTurn):
                    grade = _generate(rng, graded.generate, times)
                    running[self.pool.submit(grade, times)] = (chunk_id, rng)
                else:
                    out[chunk_id] = graded
        times.wait_s += time.perf_counter() - wait_start - (times.generate_s - generating)
        if chunks:  # the device's generator as chunk after chunk would leave it
            rngs[chunks[-1][0]].restore_cuda()
        return {chunk_id: out[chunk_id] for chunk_id, _ in chunks}


@dataclass(slots=True)
class RngState:
    """One chunk's sampling RNG between its turns: torch's CPU generator and, on a GPU, the
    device's (every engine draws from them: `models.engines.engine`)."""

    cpu: torch.Tensor
    cuda: list[torch.Tensor] | None

    @staticmethod
    def seeded(seed: int) -> RngState:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            cuda = None
            if torch.cuda.is_available():
                torch.cuda.manual_seed_all(seed)
                cuda = torch.cuda.get_rng_state_all()
            return RngState(torch.random.get_rng_state(), cuda)

    def restore_cuda(self) -> None:
        if self.cuda is not None:
            torch.cuda.set_rng_state_all(self.cuda)


def _generate(rng: RngState, work: Callable[[], Grading], times: RolloutTimes) -> Grading:
    """`work` (a chunk's next generation) under the chunk's RNG, which then holds the state the
    draws left; torch's CPU generator is as it was before."""
    start = time.perf_counter()
    with torch.random.fork_rng(devices=[]):
        torch.random.set_rng_state(rng.cpu)
        rng.restore_cuda()
        grade = work()
        rng.cpu = torch.random.get_rng_state()
        if rng.cuda is not None:
            rng.cuda = torch.cuda.get_rng_state_all()
    times.generate_s += time.perf_counter() - start
    return grade


def _chunk_seed(seed: int, step: int, round_: int, chunk: int) -> int:
    return (seed * 1_000_003 + step * 10_007 + round_ * 101 + chunk) % (2**63)


def gather_chunks(n_chunks: int, rank: int, world: int) -> list[int]:
    """The chunk ids this process generates: round-robin over processes."""
    return list(range(rank, n_chunks, world))


def idle_processes(groups_per_step: int, groups_per_generate: int, world: int) -> str:
    """What to say when a step's first sampling round leaves processes without a chunk (their
    devices idle while the others generate), else "". `execrl train` and `execrl plan` say it."""
    n_chunks = -(-groups_per_step // groups_per_generate)
    if n_chunks >= world:
        return ""
    fits = max(1, groups_per_step // world)
    return (
        f"{world - n_chunks} of {world} processes generate nothing while the others do: a step's "
        f"{groups_per_step} groups (rl.groups_per_step) make {n_chunks} chunk(s) of "
        f"sampling.groups_per_generate = {groups_per_generate}; set it to {fits} or less"
    )
