"""Execution-free analyses (pyflakes, pycodestyle, bandit, ruff) as values that can run ahead of scoring.

A leaf such as `Style` names the analysis it reads as an `Analysis`: a module-level function and
its settings. That makes it hashable, so results are cached by program, and picklable, so a
worker process can run it while the sandbox executes (`analyser.py`). The scorer attaches the
raw results to each sample (`Sample.analyses`); a leaf scoring a sample without them runs its
analysis itself (`Sample.analysed`). Both paths call `analyse_many`, so they give the same results, failures included.
A `batched` analysis (ruff: one subprocess for many programs) is called once per batch.

Hostile source never aborts scoring. A program the analysers cannot handle (past Python's
recursion limit, out of memory, over `MAX_PROGRAM_CHARS`, or `Unanalysable` for an analysis's own
reason, such as pycodestyle's regexes on a huge line) fails as the program's fault: its leaves
give -max_penalty, as for a program that does not parse, with the reason. Any other exception is
the analysis's fault and surfaces as an `AnalysisError` naming the task, never as a score.

Comments never change a reward: every analysis sees the program with the letters and digits of
its comments written as "x" (`# noqa: E501` reads `# xxxx: xxxx`), so no backend can honour a
suppression comment (`# noqa`, `# nosec`, `# type: ignore`, `# ruff: noqa`, ruff's exemption of
lines that end in a pragma from E501, ...), while a comment's length and spacing, which the style
rules read, stay as written.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
import traceback
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


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


# A program longer than this is not analysed: the pure-Python analysers cost ~0.1 ms a line
# (200,000 lines took pycodestyle 50 s), and no completion a model writes comes near it.
MAX_PROGRAM_CHARS = 200_000


@dataclass(frozen=True, slots=True)
class Failed:
    """An analysis raised on a program: kept as data so the failure surfaces, with the task's id,
    exactly where the serial path would raise it (when a leaf reads it), not as a zero.

    `programs_fault`: the program is beyond what the analysis can handle (see the module's
    docstring); its leaves score it -max_penalty instead of raising."""

    error: str
    programs_fault: bool = False


class AnalysisError(RuntimeError):
    """An analysis failed on a program, or the process running analyses died."""


class Unanalysable(Exception):
    """Raised by an analysis for a program it cannot check in reasonable time or memory."""


_PROGRAMS_FAULT = (RecursionError, MemoryError, Unanalysable)


def parse(program: str) -> ast.Module | None:
    """The program's AST, or None when it does not parse (as `syntax.parses` decides). Nesting
    past the recursion limit (a 5,000-term sum) does not parse: CPython cannot compile it."""
    try:
        with warnings.catch_warnings():  # invalid escape sequences warn; they are not errors
            warnings.simplefilter("ignore")
            return ast.parse(program)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # ValueError: NUL bytes
        return None


_COMMENT_TEXT = re.compile(r"[A-Za-z0-9]")


def neutral_comments(program: str) -> str:
    """`program` with every comment's ASCII letters and digits written as "x" (see the module's
    docstring); `Unanalysable` when it cannot be tokenized."""
    if "#" not in program:
        return program
    lines = io.StringIO(program).readlines()  # the lines tokenize numbers its rows by
    try:
        for token in tokenize.generate_tokens(io.StringIO(program).readline):
            if token.type == tokenize.COMMENT:
                (row, col), text = token.start, token.string
                line = lines[row - 1]
                lines[row - 1] = line[:col] + _COMMENT_TEXT.sub("x", text) + line[col + len(text) :]
    except (tokenize.TokenError, SyntaxError, IndexError) as exc:
        raise Unanalysable(f"its comments cannot be read: {exc}") from None
    return "".join(lines)


def analyse(program: str, analyses: Sequence[Analysis]) -> tuple[Any, ...]:
    """Each analysis's raw result on one shared parse of `program`; None for every analysis
    when it does not parse (the leaves give such programs -max_penalty)."""
    return analyse_many([program], analyses)[0]


def analyse_many(programs: Sequence[str], analyses: Sequence[Analysis]) -> list[tuple[Any, ...]]:
    """`analyse` over a batch: one round trip to a worker process, and one call of each batched
    analysis, for many programs. A batched analysis that raises fails every program it had."""
    out: list[list[Any]] = [[None] * len(analyses) for _ in programs]
    parsed: list[tuple[int, ast.Module]] = []
    programs = list(programs)  # each parsed one is replaced by its `neutral_comments` form
    for i, program in enumerate(programs):
        if len(program) > MAX_PROGRAM_CHARS:
            too_long = f"{len(program)} characters, over the {MAX_PROGRAM_CHARS} analysed"
            out[i] = [Failed(too_long, programs_fault=True)] * len(analyses)
            continue
        try:
            tree = parse(program)
            if tree is not None:
                programs[i] = neutral_comments(program)
        except Exception as exc:  # noqa: BLE001 - the program's: parse and tokenize are sound
            out[i] = [Failed(_describe(exc), programs_fault=True)] * len(analyses)
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
                out[i][j] = Failed(_describe(exc), isinstance(exc, _PROGRAMS_FAULT))
    return [tuple(r) for r in out]


def _batch(a: Analysis, programs: Sequence[str], parsed: list[tuple[int, ast.Module]]) -> list[Any]:
    """One call for the batch. When it fails, each program is tried alone, so that a program
    the analysis fails on by itself (ruff ending with an error on it) fails alone, as its fault;
    when every program fails alone too, the failure is the analysis's, for all of them."""
    if not parsed:
        return []
    try:
        return _batch_call(a, programs, parsed)
    except Exception as exc:  # noqa: BLE001 - reported where each leaf reads it
        failed = Failed(_describe(exc))
    if len(parsed) == 1:
        return [failed]
    alone: list[Any] = []
    for item in parsed:
        try:
            alone += _batch_call(a, programs, [item])
        except Exception as exc:  # noqa: BLE001 - as above
            alone.append(Failed(_describe(exc), programs_fault=True))
    if all(isinstance(r, Failed) for r in alone):
        return [failed] * len(parsed)
    return alone


def _batch_call(
    a: Analysis, programs: Sequence[str], parsed: list[tuple[int, ast.Module]]
) -> list[Any]:
    results = list(a.fn([programs[i] for i, _ in parsed], [t for _, t in parsed], *a.args))
    if len(results) != len(parsed):
        raise AnalysisError(f"{len(results)} results for {len(parsed)} programs")
    return results


def _describe(exc: BaseException) -> str:
    return "".join(traceback.format_exception_only(exc)).strip()
