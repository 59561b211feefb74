"""The record every reward reads: a task, the model's completion, and what execution said."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from execrl.rewards.analysis.analysis import Analysis, AnalysisError, Failed, analyse
from execrl.sandbox import ExecutionResult
from execrl.tasks.schema import Task

_MISSING = object()


@dataclass(frozen=True, slots=True)
class Sample:
    """One completion of one task, with the program built from it and its execution results.

    The program that ran is `prefix + completion[code_span[0]:code_span[1]]`: `prefix` is text
    that did not come from the model (the prompt, for completion-style tasks). Token credit uses
    this to map a line of the program back to characters of the completion.
    """

    task: Task
    completion: str
    program: str | None  # None: no code could be extracted
    prefix: str = ""
    code_span: tuple[int, int] | None = None  # characters of the completion that are code
    result: ExecutionResult | None = None  # the hidden tests; None: not executed
    visible_result: ExecutionResult | None = None  # the visible tests, when they were run
    n_tokens: int | None = None  # completion length in tokens, when known
    offsets: tuple[tuple[int, int], ...] | None = None  # (start, end) characters of each token
    noise_flipped: bool = False  # injected label noise reversed `result`
    # raw results of execution-free analyses the scorer ran ahead (analysis.py); None: none
    analyses: Mapping[Analysis, Any] | None = None
    # EvalPlus tasks: the base and the plus runs that `result` combines (`grading.py`)
    base_result: ExecutionResult | None = None
    plus_result: ExecutionResult | None = None

    def execution(self, tests: str = "hidden") -> ExecutionResult:
        """The result of `tests` ("hidden" or "visible"); tasks without visible tests fall back
        to their hidden result, so a "visible" level is then the same as the hidden one."""
        result = self.result
        if tests == "visible" and self.visible_result is not None:
            result = self.visible_result
        elif tests not in ("hidden", "visible"):
            raise ValueError(f"tests must be 'hidden' or 'visible', not {tests!r}")
        if result is None:
            raise ValueError(
                f"task {self.task.id}: this reward needs execution results, but the sample was "
                "not executed; score it with RewardScorer, or pass result= to Sample"
            )
        return result

    def analysed(self, analysis: Analysis) -> Any:
        """The raw result of `analysis` on this program: precomputed by the scorer when it
        attached one, computed here otherwise. None when there is no program or it does not
        parse; a `Failed` the program is at fault for (the leaf gives it -max_penalty, see
        `analysis_leaf.unvouched`)."""
        if self.program is None:
            return None
        found = self.analyses.get(analysis, _MISSING) if self.analyses else _MISSING
        if found is _MISSING:
            found = analyse(self.program, (analysis,))[0]
        if isinstance(found, Failed) and not found.programs_fault:
            raise AnalysisError(
                f"task {self.task.id}: the {analysis.name} analysis failed on this program: "
                f"{found.error}"
            )
        return found

    @classmethod
    def of(
        cls, task: Task, completion: str, result: ExecutionResult | None = None, **kw: object
    ) -> Sample:
        """A sample whose whole completion is the program (handy in tests and notebooks)."""
        return cls(task, completion, completion, "", (0, len(completion)), result, **kw)  # type: ignore[arg-type]
