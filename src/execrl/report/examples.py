"""Example completions: a few per step, the best and worst by reward, in examples.jsonl.

The report shows the best and worst of the whole run from this file, so a reader sees what the
policy actually writes, not only its numbers. Where a verifier kept images of a run (the chart
verifier's render and its reference chart, docs/verifiers.md), they are written under the run
directory's `artifacts/`, named by their content, and the example lists them.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

TEXT_CAP = 4000  # characters of prompt or completion kept per example
IMAGE_DIR = "artifacts"  # under the run directory
# Only PNG files are kept: the bytes are what a program wrote, and the report shows them as an
# image; anything else (an SVG or HTML page with a script in it) must never reach the page.
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


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
    images: tuple[str, ...] = ()  # images a verifier kept, relative to the run directory


def pick(
    step: int,
    groups: Sequence[Sequence[Any]],
    tasks: Sequence[Any],
    k: int = 2,
    run_dir: Path | None = None,
) -> list[Example]:
    """The k best and k worst scored completions (rl.rollout.scored.Scored) of one step, distinct;
    with `run_dir`, the images their verifiers kept are written there (`keep_images`)."""
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
                images=keep_images(_result_of(s), run_dir),
            )
        )
    return out


def _result_of(scored: Any) -> Any:
    """The execution result behind a scored completion, where it has one (a record that carries
    only the reward, as some callers' stand-ins for `Scored` do, has none)."""
    return getattr(getattr(scored, "sample", None), "result", None)


def keep_images(result: Any, run_dir: Path | None) -> tuple[str, ...]:
    """The PNG images among a verified run's artifacts, written to `run_dir/artifacts/` named by
    a hash of their bytes (a reference chart shown at every step is one file); their paths
    relative to `run_dir`. Nothing for runs no verifier judged."""
    from execrl.sandbox import verification_of

    found = verification_of(result) if result is not None else None
    if found is None or run_dir is None:
        return ()
    kept = []
    for artifact in found.artifacts:
        if artifact.kind != "image" or not artifact.data.startswith(PNG_MAGIC):
            continue
        stem = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(artifact.path).stem)[:40]
        name = f"{hashlib.sha256(artifact.data).hexdigest()[:16]}-{stem}.png"
        path = run_dir / IMAGE_DIR / name
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_bytes(artifact.data)
            tmp.replace(path)
        kept.append(f"{IMAGE_DIR}/{name}")
    return tuple(kept)


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
            record = json.loads(line)
            out.append(Example(**{**record, "images": tuple(record.get("images", ()))}))
        except (ValueError, TypeError, AttributeError) as e:
            raise ValueError(f"{path}:{n}: not an example record ({e})") from e
    return out


def best_and_worst(examples: Sequence[Example], n: int = 3) -> tuple[list[Example], list[Example]]:
    """The n highest-scoring and n lowest-scoring examples of the run; ties go to later steps
    (what the policy writes now). With fewer than 2n, they are split in half. Masked samples
    (infrastructure errors) are neither, and a completion a task got again with the same
    score (a small policy repeats itself, at later steps or within a group) is shown once, at
    its latest step; the same text scored otherwise (a verifier that renders or measures) is
    another example."""
    by_step = sorted((e for e in examples if not e.masked), key=lambda e: e.step)
    pool = list({(e.task, e.completion, e.score): e for e in by_step}.values())  # the last kept
    best = sorted(pool, key=lambda e: (-e.score, -e.step))[: min(n, (len(pool) + 1) // 2)]
    rest = [e for e in pool if e not in best]
    worst = sorted(rest, key=lambda e: (e.score, -e.step))[:n]
    return best, worst
