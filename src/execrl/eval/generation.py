"""Generating samples for a benchmark: prompts, programs from raw model output (`solution.py`),
and a samples file that an interrupted run continues instead of redoing.

The samples file is JSONL in EvalPlus's format (`task_id`, `solution`, plus `completion_id` and
the model's `raw` output), so `execrl eval-samples` reads it as it is. Lines are appended and
flushed a chunk of tasks at a time; a run that finds the file continues with what is missing.
A `.meta.json` beside it records the model and sampling settings: resuming with other settings
is an error rather than a silent mix.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from execrl.eval.prompt_style import STYLES, PromptStyle
from execrl.eval.samples import Sample
from execrl.models.engines.backends import GenerationParams, Generator
from execrl.tasks.errors import TaskDataError
from execrl.tasks.schema import Task


@dataclass(frozen=True, slots=True)
class GenerationMeta:
    """What the samples were generated with; a resumed run must match it."""

    model: str
    benchmark: str
    n: int
    temperature: float
    top_p: float
    max_new_tokens: int
    chat: bool
    # The stop rules (`models.engines.stop_rules`): a sample cut at its code block's end or at a
    # loop is not the sample the same settings without them give, so a resume must match them too
    code_end: bool = False
    repeat_ngram: int = 0
    prompt: str = "execrl"  # the prompt style (`eval.prompt_style`): it changes every answer


def prompt_text(task: Task, chat: bool) -> str:
    """The user's message for `task` in execrl's own prompt style."""
    return STYLES["execrl"].text(task, chat)


class SamplesFile:
    """An append-only JSONL samples file with its meta sidecar, safe to resume."""

    def __init__(self, path: Path, meta: GenerationMeta, restart: bool = False) -> None:
        self.path = path
        self.meta_path = path.with_name(path.stem + ".meta.json")
        self.meta = meta
        if restart:
            path.unlink(missing_ok=True)
            self.meta_path.unlink(missing_ok=True)
        self._check_meta()

    def _check_meta(self) -> None:
        wanted = asdict(self.meta)
        if self.meta_path.exists():
            try:
                found = json.loads(self.meta_path.read_text())
            except json.JSONDecodeError:
                raise TaskDataError(
                    f"{self.meta_path}: not JSON; remove it and {self.path}, or pass --restart"
                ) from None
            diff = {k: (found.get(k), v) for k, v in wanted.items() if found.get(k) != v}
            if diff:
                said = ", ".join(f"{k}: {a!r} then, {b!r} now" for k, (a, b) in diff.items())
                raise TaskDataError(
                    f"{self.path}: these samples were generated with other settings ({said}); "
                    "use another --out-dir, or --restart to start over"
                )
        elif self.path.exists() and self.path.stat().st_size:
            raise TaskDataError(
                f"{self.path}: a samples file without {self.meta_path.name}; "
                "use another --out-dir, or --restart to start over"
            )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.meta_path.write_text(json.dumps(wanted, indent=1) + "\n")

    def read(self, tasks: Sequence[Task]) -> list[Sample]:
        """The samples written so far. A torn last line (the run was killed while writing) is
        cut off; any other unreadable line is an error naming it."""
        if not self.path.exists():
            return []
        data = self.path.read_bytes()
        end = data.rfind(b"\n") + 1
        if end < len(data):
            with open(self.path, "r+b") as fh:
                fh.truncate(end)
            data = data[:end]
        known = {t.id for t in tasks}
        samples = []
        for lineno, line in enumerate(data.decode("utf-8").splitlines(), 1):
            where = f"{self.path}:{lineno}"
            try:
                record = json.loads(line)
                task_id, solution = record["task_id"], record["solution"]
            except (json.JSONDecodeError, KeyError, TypeError):
                raise TaskDataError(
                    f"{where}: not a samples line (task_id, solution); --restart starts over"
                ) from None
            if task_id not in known:
                raise TaskDataError(f"{where}: task_id {task_id!r} is not in {self.meta.benchmark}")
            samples.append(Sample(task_id, solution, where, record))
        return samples

    def append(self, records: Sequence[dict[str, Any]]) -> None:
        with open(self.path, "a", encoding="utf-8") as fh:
            for rec in records:
                fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
            fh.flush()
            os.fsync(fh.fileno())


def generate_missing(
    generator: Generator,
    tasks: Sequence[Task],
    out: SamplesFile,
    params: GenerationParams,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Generate what the samples file lacks, so that every task has `out.meta.n` samples;
    returns how many were generated now. A call holds `params.batch_size` sequences (at least
    one task's): what an interrupted run loses, and what an engine batches."""
    have = Counter(s.task_id for s in out.read(tasks))
    todo = [t for t in tasks if have[t.id] < out.meta.n]
    if progress is not None:
        progress(sum(min(have[t.id], out.meta.n) for t in tasks))
    made = 0
    chunk_tasks = max(1, params.batch_size // out.meta.n)
    style = STYLES[out.meta.prompt]
    chat = generator.chat

    def stops(task: Task) -> tuple[str, ...]:
        return style.stops(task, chat)

    # One generate call shares its stop sequences and its stop rule's language (a row ends at
    # its first block in its task's language), so tasks are chunked by both.
    for ends, language in sorted({(stops(t), t.language) for t in todo}):
        group = [t for t in todo if stops(t) == ends and t.language == language]
        call = replace(params, stop=ends, code_language=language,
                       reply_prefix=style.reply_prefix(chat))  # fmt: skip
        for start in range(0, len(group), chunk_tasks):
            chunk = group[start : start + chunk_tasks]
            made += _generate_chunk(generator, style, chunk, have, out, call)
            if progress is not None:
                progress(sum(out.meta.n - have[t.id] for t in chunk))
    return made


def _generate_chunk(generator, style: PromptStyle, chunk, have, out: SamplesFile,
                    params) -> int:  # fmt: skip
    """One chunk of tasks; tasks with some samples already get the rest. Tasks are grouped by
    how many they still need, since one call gives the same number to every prompt."""
    records = []
    for need in sorted({out.meta.n - have[t.id] for t in chunk}):
        tasks = [t for t in chunk if out.meta.n - have[t.id] == need]
        texts = generator.generate(
            [style.text(t, generator.chat) for t in tasks],
            need,
            params,
        )
        for task, raws in zip(tasks, texts, strict=True):
            for i, raw in enumerate(raws):
                records.append(
                    {
                        "task_id": task.id,
                        "completion_id": have[task.id] + i,
                        "solution": style.program(task, raw, generator.chat),
                        "raw": raw,
                    }
                )
    out.append(records)
    return len(records)


def first_n(samples: Sequence[Sample], tasks: Sequence[Task], n: int) -> list[Sample]:
    """Each task's first n samples, tasks in benchmark order: the set pass@k is computed on."""
    by_task: dict[str, list[Sample]] = {t.id: [] for t in tasks}
    for s in samples:
        by_task[s.task_id].append(s)
    return [s for t in tasks for s in by_task[t.id][:n]]
