"""Example completions: a few per step, the best and worst by reward, in examples.jsonl.

The report shows the best and worst of the whole run from this file, so a reader sees what the
policy actually writes, not only its numbers.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

TEXT_CAP = 4000  # characters of prompt or completion kept per example


@dataclass(frozen=True, slots=True)
class Example:
    step: int
    task: str
    score: float
    verdict: str
    passed: bool
    masked: bool
    n_tokens: int
    truncated: bool
    prompt: str
    completion: str
    reason: str = ""


def pick(
    step: int, groups: Sequence[Sequence[Any]], tasks: Sequence[Any], k: int = 2
) -> list[Example]:
    """The k best and k worst scored completions (rl.rollout.Scored) of one step, distinct."""
    scored = [s for g in groups for s in g if math.isfinite(s.score)]
    ranked = sorted(scored, key=lambda s: s.score, reverse=True)
    chosen = ranked[:k] + ranked[k:][-k:]
    out = []
    for s in chosen:
        task = tasks[s.task_index]
        out.append(
            Example(
                step=step,
                task=str(task.id),
                score=float(s.score),
                verdict=s.verdict,
                passed=bool(s.passed),
                masked=bool(s.reward.masked),
                n_tokens=int(s.completion.n_tokens),
                truncated=bool(s.completion.truncated),
                prompt=task.prompt[:TEXT_CAP],
                completion=s.completion.text[:TEXT_CAP],
                reason=str(s.reward.reason or ""),
            )
        )
    return out


class ExampleLog:
    """examples.jsonl; on resume, the steps from the checkpoint on are dropped (as metrics.jsonl)."""

    def __init__(self, path: Path, keep_steps: int = 0) -> None:
        self.path = path
        kept = [e for e in read(path) if e.step < keep_steps] if path.exists() else []
        path.write_text("".join(json.dumps(asdict(e)) + "\n" for e in kept))

    def write(self, examples: Sequence[Example]) -> None:
        with self.path.open("a") as f:
            f.writelines(json.dumps(asdict(e)) + "\n" for e in examples)


def read(path: Path) -> list[Example]:
    out = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(Example(**json.loads(line)))
        except (ValueError, TypeError) as e:
            raise ValueError(f"{path}:{n}: not an example record ({e})") from e
    return out


def best_and_worst(examples: Sequence[Example], n: int = 3) -> tuple[list[Example], list[Example]]:
    """The n highest-scoring and n lowest-scoring examples of the run; ties go to later steps
    (what the policy writes now). With fewer than 2n, they are split in half. Masked samples
    (infrastructure errors) are neither."""
    pool = [e for e in examples if not e.masked]
    best = sorted(pool, key=lambda e: (-e.score, -e.step))[: min(n, (len(pool) + 1) // 2)]
    rest = [e for e in pool if e not in best]
    worst = sorted(rest, key=lambda e: (e.score, -e.step))[:n]
    return best, worst
