"""Execution-free analyses (pyflakes, pycodestyle, bandit, ruff) as values that can run ahead of scoring.

A leaf such as `Style` names the analysis it reads as an `Analysis`: a module-level function and
its settings. That makes it hashable, so results are cached by program, and picklable, so a
worker process can run it while the sandbox executes (`analyser.py`). The scorer attaches the
raw results to each sample (`Sample.analyses`); a leaf scoring a sample without them runs its
analysis itself. Both paths call `analyse_many`, so they give the same results, failures included.
A `batched` analysis (ruff: one subprocess for many programs) is called once per batch.
"""

from __future__ import annotations

import ast
import traceback
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from execrl.rewards.sample import Sample


@dataclass(frozen=True)
class Analysis:
    """`fn(program, tree, *args)`: the raw result a leaf turns into a score.

    `fn` must live at module level (it is pickled by name for worker processes) and be a pure
    function of the program and `args`: its result is cached by program. Settings that only
    weigh the result (penalty weights) belong to the leaf, not to `args`, so leaves that differ
    only in weights share one analysis.

    `batched`: `fn(programs, trees, *args)` returns one result per program (a result may be a
    `Failed`), so a cost paid per call (starting a process) is paid once per batch."""

    name: str  # for people: "pyflakes", "pycodestyle", "bandit", "ruff"
    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()
    batched: bool = False


@dataclass(frozen=True, slots=True)
class Failed:
    """An analysis raised on a program: kept as data so the failure surfaces, with the task's id,
    exactly where the serial path would raise it (when a leaf reads it), not as a zero."""

    error: str


class AnalysisError(RuntimeError):
    """An analysis failed on a program, or the process running analyses died."""


def parse(program: str) -> ast.Module | None:
    """The program's AST, or None when it does not parse (as `syntax.parses` decides)."""
    try:
        with warnings.catch_warnings():  # invalid escape sequences warn; they are not errors
            warnings.simplefilter("ignore")
            return ast.parse(program)
    except (SyntaxError, ValueError):  # ValueError: NUL bytes in the source
        return None


def analyse(program: str, analyses: Sequence[Analysis]) -> tuple[Any, ...]:
    """Each analysis's raw result on one shared parse of `program`; None for every analysis
    when it does not parse (the leaves give such programs -max_penalty)."""
    return analyse_many([program], analyses)[0]


def analyse_many(programs: Sequence[str], analyses: Sequence[Analysis]) -> list[tuple[Any, ...]]:
    """`analyse` over a batch: one round trip to a worker process, and one call of each batched
    analysis, for many programs. A batched analysis that raises fails every program it had."""
    out: list[list[Any]] = [[None] * len(analyses) for _ in programs]
    parsed: list[tuple[int, ast.Module]] = []
    for i, program in enumerate(programs):
        try:
            tree = parse(program)
        except Exception as exc:  # noqa: BLE001 - RecursionError, MemoryError on deep nesting
            out[i] = [Failed(_describe(exc))] * len(analyses)
            continue
        if tree is not None:
            parsed.append((i, tree))
    for j, a in enumerate(analyses):
        if a.batched:
            for (i, _), result in zip(parsed, _batch(a, programs, parsed), strict=True):
                out[i][j] = result
            continue
        for i, tree in parsed:
            try:
                out[i][j] = a.fn(programs[i], tree, *a.args)
            except Exception as exc:  # noqa: BLE001 - reported where the leaf reads it
                out[i][j] = Failed(_describe(exc))
    return [tuple(r) for r in out]


def _batch(a: Analysis, programs: Sequence[str], parsed: list[tuple[int, ast.Module]]) -> list[Any]:
    if not parsed:
        return []
    try:
        results = list(a.fn([programs[i] for i, _ in parsed], [t for _, t in parsed], *a.args))
        if len(results) != len(parsed):
            raise AnalysisError(f"{len(results)} results for {len(parsed)} programs")
    except Exception as exc:  # noqa: BLE001 - reported where each leaf reads it
        return [Failed(_describe(exc))] * len(parsed)
    return results


def _describe(exc: BaseException) -> str:
    return "".join(traceback.format_exception_only(exc)).strip()


_MISSING = object()


def analysed(sample: Sample, analysis: Analysis) -> Any:
    """The raw result of `analysis` on the sample's program: precomputed by the scorer when it
    attached one, computed here otherwise. None when there is no program or it does not parse."""
    if sample.program is None:
        return None
    found = sample.analyses.get(analysis, _MISSING) if sample.analyses else _MISSING
    if found is _MISSING:
        found = analyse(sample.program, (analysis,))[0]
    if isinstance(found, Failed):
        raise AnalysisError(
            f"task {sample.task.id}: the {analysis.name} analysis failed on this program: "
            f"{found.error}"
        )
    return found
