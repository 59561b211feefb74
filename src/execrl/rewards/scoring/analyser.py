"""Running a reward tree's analyses ahead of scoring: in worker processes, deduplicated, cached.

pyflakes, pycodestyle and bandit are pure Python and cost a few milliseconds a program (ruff, a
batched analysis, costs a process start per batch and far less per program). Run in
the scorer's thread they serialise with scoring and hold the GIL that the sandbox pool's
threads need to feed their workers; in worker processes (`analysis_worker.py`) they overlap
execution instead.
Programs are keyed by a digest: identical completions (frequent within a GRPO group, and
across steps) are analysed once. Memory stays bounded: the cache keeps `cache_size` results,
and only the chunks the scorer has in flight are being analysed.
"""

from __future__ import annotations

import hashlib
import math
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any

from execrl.rewards.analysis.analysis import Analysis, AnalysisError, analyse_many
from execrl.rewards.analysis.analysis_worker import WorkerDied, WorkerPool
from execrl.rewards.sample import Sample
from execrl.rewards.scoring.config import children

Results = tuple[Any, ...]  # one raw result per analysis, in `Analyser.analyses` order


def digest(program: str) -> bytes:
    return hashlib.blake2b(program.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def analyses_of(reward: object) -> tuple[Analysis, ...]:
    """Every distinct analysis the tree's leaves name (their `analysis`), in tree order."""
    found: dict[Analysis, None] = {}
    stack = [reward]
    while stack:
        node = stack.pop()
        a = getattr(node, "analysis", None)
        if isinstance(a, Analysis):
            found.setdefault(a)
        stack.extend(reversed(children(node)))
    return tuple(found)


@dataclass
class Pending:
    """A chunk's analyses in flight: which digest each sample needs, and who computes it."""

    keys: list[bytes | None]  # per sample; None: no program
    hits: dict[bytes, Results] = field(default_factory=dict)  # cached at submit
    futures: dict[bytes, tuple[Future[list[Results]], int]] = field(default_factory=dict)


class Analyser:
    """`submit(chunk)` starts analysing a chunk's programs; `attach(pending, executed)` returns
    the executed samples with `Sample.analyses` set. `workers = 0` analyses in the caller's
    thread, with the cache."""

    def __init__(
        self,
        analyses: tuple[Analysis, ...],
        workers: int = 1,
        cache_size: int = 8192,
        piece: int = 32,
    ) -> None:
        self.analyses = analyses
        self.workers = workers
        self.piece = piece  # programs per round trip: small enough to spread over workers
        # A batched analysis (ruff) pays a process start per call: one piece per worker per chunk.
        self.batched = any(a.batched for a in analyses)
        self.cache_size = cache_size
        self._cache: OrderedDict[bytes, Results] = OrderedDict()
        self._inflight: dict[bytes, tuple[Future[list[Results]], int]] = {}
        self._pool: WorkerPool | None = None

    @property
    def started(self) -> bool:
        return self._pool is not None

    def close(self) -> None:
        """End the worker processes; a later submit starts new ones."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        self._inflight.clear()

    # -- analysis ----------------------------------------------------------------------------

    def submit(self, samples: Sequence[Sample]) -> Pending:
        """Start analysing the programs of `samples` that are neither cached nor in flight."""
        pending = Pending([None if s.program is None else digest(s.program) for s in samples])
        todo: dict[bytes, str] = {}
        for s, key in zip(samples, pending.keys, strict=True):
            if key is None or key in pending.hits:
                continue
            if key in self._cache:
                pending.hits[key] = self._cache[key]
            elif key in self._inflight:
                pending.futures[key] = self._inflight[key]
            else:
                todo.setdefault(key, s.program)  # type: ignore[arg-type]
        if self.workers == 0:  # here and now, in the caller's thread
            found = analyse_many(list(todo.values()), self.analyses) if todo else []
            for key, results in zip(todo, found, strict=True):
                pending.hits[key] = results
                self._store(key, results)
            return pending
        keys = list(todo)
        piece = math.ceil(len(keys) / self.workers) if self.batched else self.piece
        for i in range(0, len(keys), max(piece, 1)):
            part = keys[i : i + piece]
            if self._pool is None:
                self._pool = WorkerPool(self.workers)
            future = self._pool.submit(self.analyses, [todo[k] for k in part])
            for j, key in enumerate(part):
                self._inflight[key] = pending.futures[key] = (future, j)
        return pending

    def attach(self, pending: Pending, samples: Sequence[Sample]) -> list[Sample]:
        """`samples` (the chunk `pending` was submitted for, executed) with their analyses."""
        found = dict(pending.hits)  # held here, so a small cache cannot evict them early
        for key, (future, j) in pending.futures.items():
            found[key] = self._result(future, pending, samples)[j]
            self._inflight.pop(key, None)
        out = []
        for s, key in zip(samples, pending.keys, strict=True):
            if key is None:
                out.append(s)
                continue
            results = found[key]
            self._store(key, results)
            out.append(replace(s, analyses=dict(zip(self.analyses, results, strict=True))))
        return out

    def _store(self, key: bytes, results: Results) -> None:
        self._cache[key] = results
        self._cache.move_to_end(key)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    def _result(
        self, future: Future[list[Results]], pending: Pending, samples: Sequence[Sample]
    ) -> list[Results]:
        """A piece's results; a dead worker is an error for people, naming the piece's tasks."""
        try:
            return future.result()
        except WorkerDied as exc:
            self._inflight.clear()  # what the dead worker owed is recomputed on the next call
            ids = sorted(
                {
                    s.task.id
                    for s, key in zip(samples, pending.keys, strict=True)
                    if key in pending.futures and pending.futures[key][0] is future
                }
            )
            raise AnalysisError(
                f"a static-analysis worker process died ({exc}) while analysing programs of "
                f"tasks {ids[:5]}{' ...' if len(ids) > 5 else ''}; a new one starts on the "
                "next call. To see the failure in-process, set reward.analysis_workers = 0"
            ) from exc
        except AnalysisError:
            self._inflight.clear()  # a failed piece must not answer for later chunks
            raise
