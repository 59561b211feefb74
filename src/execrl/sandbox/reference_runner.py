"""The sandbox side of EvalPlus's expected outputs: each reference run on its inputs.

`execrl.tasks.reference_runs` holds the driver program and the parsing of what it prints; this
module runs it in the sandbox. Loaders take it as `reference_runner`, so the tasks layer never
imports the sandbox: `load_benchmark("humaneval+", reference_runner=sandbox_runner())`.
"""

from __future__ import annotations

from collections.abc import Sequence

from execrl.sandbox.job import Job
from execrl.sandbox.limits import Limits
from execrl.sandbox.pool import Sandbox
from execrl.tasks.errors import TaskDataError
from execrl.tasks.reference_runs import (
    DRIVER,
    Pending,
    ReferenceOutputs,
    ReferenceRun,
    ReferenceRunner,
    batches,
    finish,
    parse_stdout,
    progress_bar,
    request,
    second_round,
)
from execrl.tasks.schema import StdioCase, StdioTests


def sandbox_runner(workers: int = 2, progress: bool = True) -> ReferenceRunner:
    """A ReferenceRunner on execrl's sandbox."""

    def run_all(runs: Sequence[ReferenceRun]) -> dict[str, ReferenceOutputs]:
        # EvalPlus gives a group at most 61 s, so a reference slower than that on one input
        # could not be graded anyway; 4 GiB is EvalPlus's memory limit.
        limits = Limits(wall_s=120, cpu_s=120, memory_mb=4096, scratch_mb=256)
        pending = [Pending(r, {}, {}, {}, {}, [], {}) for r in runs]
        # First round: every input in batches; later rounds: what did not fit, alone or sliced.
        work: list[tuple[Pending, list[int], tuple[int, int] | None]] = [
            (p, b, None) for p in pending for b in batches(p.run)
        ]
        bar = progress_bar(len(work), progress)
        with Sandbox(workers=workers) as sb:
            while work:
                jobs = [
                    Job(
                        program=f"__execrl_source = {p.run.program!r}\n" + DRIVER,
                        tests=StdioTests(cases=(StdioCase(request(p.run, items, piece), ""),)),
                        limits=limits,
                        id=p.run.key,
                    )
                    for p, items, piece in work
                ]
                results = sb.run_many(jobs)
                again: list[tuple[Pending, int]] = []
                for (p, items, piece), r in zip(work, results, strict=True):
                    if r.verdict.value not in ("PASSED", "WRONG_ANSWER"):
                        why = f"{r.verdict.value} {r.message}".rstrip()
                        if piece is None and len(items) == 1:
                            p.excluded[items[0]] = f"the reference hit a sandbox limit: {why}"
                        elif piece is None:  # find the input that did it: each alone
                            for i in items:
                                p.lengths.pop(i, None)
                                again.append((p, i))
                        else:
                            p.errors.append(f"{p.run.key}: the reference did not run: {why}")
                        bar.update(1)
                        continue
                    again.extend(
                        (p, i) for i in parse_stdout(p, r.stdout, items, piece is not None)
                    )
                    bar.update(1)
                work = second_round(again)
                bar.total = bar.n + len(work)
        bar.close()
        errors = [e for p in pending for e in p.errors]
        if errors:
            more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
            raise TaskDataError("; ".join(errors[:5]) + more)
        return {p.run.key: finish(p) for p in pending}

    return run_all
