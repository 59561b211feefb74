"""The benchmark tasks `execrl sandbox serve` grades against (a request's `task`), loaded so
that no request can read the server's files or stall it.

What a client may name: a registered benchmark (from the server's data directory, cache or
packages, as `execrl eval` finds it), a generated set (`synthetic:...`, a suite such as
`sql:n=4`) whose `n` is at most `ServerConfig.max_generated_tasks`, or a contest loader's file
(`apps:PATH`, `livecodebench:PATH`, ...) that lies inside the server's data directories
(`ServerConfig.data_dirs`, else $EXECRL_DATA_DIR). Any other path, existing or not, and any hub
download (`apps:hf`) get one and the same refusal, before anything is opened: the answer tells
a client nothing of the server's files. `jsonl:PATH` is refused (send inline tests).

How: a set loads in a thread of its own (two at most; more waiting than
`MAX_PENDING_LOADS` is 503), never in the event loop, so /health and every other request go
on while it loads; requests for a set already loading wait for that one load; the sets loaded
are kept, the least recently used dropped past `ServerConfig.max_task_sets`; one request names
at most `max_task_sets` different sets.
"""

from __future__ import annotations

import asyncio
import os
from collections import OrderedDict
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

from fastapi import HTTPException

from execrl.sandbox.confine.hidden_paths import inside
from execrl.sandbox.service.server_config import ServerConfig
from execrl.tasks.schema import Task

MAX_NAME = 1024  # characters of a benchmark name
MAX_PENDING_LOADS = 16  # sets waiting for a loading thread; beyond it 503 + Retry-After
LOAD_THREADS = 2
PATH_REFUSED = (
    "task.benchmark: a benchmark file is served only from this server's data directory "
    "(name a registered benchmark, or a file there: e.g. livecodebench:DATA_DIR/FILE); "
    "for other tasks send inline tests"
)

TaskSet = dict[str, Task]


def data_dirs(config: ServerConfig) -> tuple[str, ...]:
    """The directories a path benchmark may name a file in, as real paths."""
    from execrl.tasks.sources import data_dir_of

    given = config.data_dirs or tuple(str(d) for d in [data_dir_of(None)] if d)
    return tuple(os.path.realpath(d) for d in given)


class TaskSets:
    """The task sets the server has loaded, by benchmark name (see the module docstring)."""

    def __init__(
        self, config: ServerConfig, load: Callable[[str], list[Task]] | None = None
    ) -> None:
        self.max_sets, self.max_generated = config.max_task_sets, config.max_generated_tasks
        self.retry_after_s = config.retry_after_s
        self.dirs = data_dirs(config)
        self._load = load or _load_benchmark
        self._sets: OrderedDict[str, TaskSet] = OrderedDict()
        self._loading: dict[str, asyncio.Future[TaskSet]] = {}
        self._threads = ThreadPoolExecutor(LOAD_THREADS, thread_name_prefix="execrl-tasks")

    def close(self) -> None:
        self._threads.shutdown(wait=False, cancel_futures=True)

    async def for_request(self, names: Iterable[str]) -> dict[str, TaskSet]:
        """The sets a request names, each checked, then loaded or taken from the cache: the
        request's own view, which later evictions do not change."""
        wanted = list(dict.fromkeys(names))
        if len(wanted) > self.max_sets:
            raise HTTPException(
                422, f"task.benchmark: {len(wanted)} benchmarks in one request; the limit is "
                f"{self.max_sets}"
            )  # fmt: skip
        for name in wanted:
            self.check(name)
        return {name: await self._get(name) for name in wanted}

    def check(self, name: str) -> None:
        """Refuse, before loading anything, a name this server does not serve."""
        from execrl.tasks.contest_registry import is_path_benchmark
        from execrl.tasks.suites import is_suite

        if len(name) > MAX_NAME:
            raise HTTPException(422, f"task.benchmark: over {MAX_NAME} characters")
        if name.startswith("jsonl:"):
            raise HTTPException(
                422, "task.benchmark: jsonl: paths are not served; send inline tests"
            )
        if is_path_benchmark(name):
            source = name.partition(":")[2].partition("?")[0]
            hub = source == "hf" or source.startswith("hf:")  # a download: never by a client
            real = os.path.realpath(source) if source and not hub else ""
            if not real or not any(inside(real, d) for d in self.dirs):
                raise HTTPException(422, PATH_REFUSED)
        elif name.startswith("synthetic:") or is_suite(name):
            n = _option(name.partition(":")[2], "n")
            if n is not None and not (n.isdigit() and int(n) <= self.max_generated):
                shown = n if len(n) <= 20 else n[:20] + "..."
                raise HTTPException(
                    422, f"task.benchmark: n={shown}: this server makes at most "
                    f"{self.max_generated} tasks of a generated set"
                )  # fmt: skip

    async def _get(self, name: str) -> TaskSet:
        if name in self._sets:
            self._sets.move_to_end(name)
            return self._sets[name]
        pending = self._loading.get(name)
        if pending is None:
            if len(self._loading) >= MAX_PENDING_LOADS:
                raise HTTPException(
                    503, "the server is loading other task sets; retry",
                    headers={"Retry-After": str(self.retry_after_s)},
                )  # fmt: skip
            loop = asyncio.get_running_loop()
            pending = asyncio.ensure_future(
                loop.run_in_executor(self._threads, self._load_set, name)
            )
            self._loading[name] = pending
            pending.add_done_callback(lambda done: self._landed(name, done))
        return await asyncio.shield(pending)

    def _landed(self, name: str, done: asyncio.Future[TaskSet]) -> None:
        self._loading.pop(name, None)
        if done.cancelled() or done.exception() is not None:
            return  # not kept: the next request names it again and is told again
        self._sets[name] = done.result()
        while len(self._sets) > self.max_sets:
            self._sets.popitem(last=False)

    def _load_set(self, name: str) -> TaskSet:
        try:
            return {t.id: t for t in self._load(name)}
        except Exception as exc:  # noqa: BLE001 - unknown name, missing data: the client's to fix
            raise HTTPException(422, f"task.benchmark: {name!r}: {exc}") from None


def _option(options: str, key: str) -> str | None:
    """`key`'s value in "k=v,k=v" (synthetic and suite names)."""
    for part in options.split(","):
        k, sep, value = part.partition("=")
        if sep and k == key:
            return value
    return None


def _load_benchmark(name: str) -> list[Task]:
    from execrl.tasks.catalog.registry import load_benchmark

    return load_benchmark(name)
