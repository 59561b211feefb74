"""The sandbox side of EvalPlus's expected outputs: each reference run on its inputs.

`execrl.tasks.reference_runs` holds the driver program, the reading of what it prints and the
choice of what runs next; this module runs it in the sandbox. Loaders take it as
`reference_runner`, so the tasks layer never imports the sandbox:
`load_benchmark("humaneval+", reference_runner=sandbox_runner())`.

Each of `workers` threads takes the next batch as soon as its run is read, rather than in
rounds: a reference whose outputs take several runs (HumanEval/15 prints 147 MB) goes on
while the other workers run the rest.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence

from execrl.sandbox.grading.job import Job
from execrl.sandbox.grading.limits import Limits
from execrl.sandbox.grading.verdict import ExecutionResult, Verdict
from execrl.sandbox.pool import WorkerPool
from execrl.tasks.reference_runs import (
    DRIVER,
    OUTPUT_CAP,
    Done,
    Pending,
    ReferenceOutputs,
    ReferenceRun,
    ReferenceRunner,
    batches,
    finish,
    follow_up,
    progress_bar,
    raise_errors,
    record,
    request,
)
from execrl.tasks.schema import Compare, StdioCase, StdioTests

# EvalPlus gives a group at most 61 s, so a reference slower than that on one input could not
# be graded anyway; 4 GiB is EvalPlus's memory limit. The whole stdout comes back.
LIMITS = Limits(wall_s=120, cpu_s=120, memory_mb=4096, scratch_mb=256, output_bytes=OUTPUT_CAP)
# The driver's stdout is never compared (it is read): compared as raw text, not split into
# tokens, which would cost seconds on a run that printed a hundred megabytes.
RAW = Compare(tokens=False)


def _job(p: Pending, items: list[int]) -> Job:
    return Job(
        program=f"__execrl_source = {p.run.program!r}\n" + DRIVER,
        tests=StdioTests(cases=(StdioCase(request(p.run, items), ""),), compare=RAW),
        limits=LIMITS,
        id=p.run.key,
    )


def _read(p: Pending, items: list[int], r: ExecutionResult) -> list[list[int]]:
    """Record a run's outputs; the batches still to run for `p`."""
    stdout = r.extra.get("stdout", r.stdout)  # the whole stdout, when over the kept 64 KiB
    assert isinstance(stdout, str)
    unreported = record(p, stdout, items)
    ended = r.verdict in (Verdict.PASSED, Verdict.WRONG_ANSWER)  # its stdout is never ""
    return follow_up(p, items, unreported, "" if ended else f"{r.verdict} {r.message}".strip())


def sandbox_runner(workers: int = 2, progress: bool = True) -> ReferenceRunner:
    """A ReferenceRunner on execrl's sandbox."""

    def run_all(
        runs: Sequence[ReferenceRun], on_done: Done | None = None
    ) -> dict[str, ReferenceOutputs]:
        pending = [Pending(r) for r in runs]
        work = deque((p, b) for p in pending for b in batches(p.run))
        for p, _ in work:
            p.open_runs += 1
        bar = progress_bar(sum(len(r.inputs) for r in runs), progress)
        cond = threading.Condition()
        done_lock = threading.Lock()  # on_done is called one reference at a time
        busy = [0]
        failures: list[BaseException] = []

        def take() -> tuple[Pending, list[int]] | None:
            with cond:
                while not work and busy[0] and not failures:
                    cond.wait()
                if not work or failures:
                    return None
                busy[0] += 1
                return work.popleft()

        def loop(sb: WorkerPool) -> None:
            while (item := take()) is not None:
                p, items = item
                try:
                    again = _read(p, items, sb.run(_job(p, items)))
                    with cond:
                        work.extend((p, b) for b in again)
                        p.open_runs += len(again) - 1
                        complete = p.complete()
                    bar.update(len(items) - sum(len(b) for b in again))
                    if complete and on_done is not None:
                        with done_lock:
                            on_done(p.run.key, finish(p))
                except BaseException as exc:  # noqa: BLE001 - raised after the join
                    with cond:
                        failures.append(exc)
                    return
                finally:
                    with cond:
                        busy[0] -= 1
                        cond.notify_all()

        with WorkerPool(workers=workers) as sb:
            threads = [threading.Thread(target=loop, args=(sb,)) for _ in range(workers)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        bar.close()
        if failures:
            raise failures[0]
        raise_errors(pending)
        return {p.run.key: finish(p) for p in pending}

    return run_all
