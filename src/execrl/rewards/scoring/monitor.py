"""Per-step counts of every flag for the training log, and a run summary of flagged samples."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from execrl.rewards.result import Flag, RewardResult
from execrl.rewards.sample import Sample

EXCERPT_CHARS = 400


@dataclass(frozen=True)
class FlaggedSample:
    step: int
    index: int  # position in that step's batch
    task_id: str
    flags: tuple[str, ...]
    score: float
    masked: bool
    reason: str
    program: str  # the first EXCERPT_CHARS characters


@dataclass
class RunSummary:
    steps: int = 0
    samples: int = 0
    masked: int = 0
    flag_counts: dict[str, int] = field(default_factory=dict)
    visible_pass_rate: float | None = None  # over samples run on both test sets
    hidden_pass_rate: float | None = None
    visible_hidden_gap: float | None = None
    gap_alarm: bool = False  # the run-level gap reached RewardMonitor.gap_alarm
    flagged: list[FlaggedSample] = field(default_factory=list)
    flagged_dropped: int = 0  # flagged samples beyond RewardMonitor.keep

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    def write(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json() + "\n", encoding="utf-8")


class RewardMonitor:
    """Feed it each step's samples and results; log `observe`'s dict; read `summary()` at the end."""

    def __init__(self, keep: int = 1000, gap_alarm: float = 0.2) -> None:
        self.keep = keep  # flagged samples kept for the summary (bounded memory)
        self.gap_alarm = gap_alarm
        self._summary = RunSummary()
        self._flags: Counter[str] = Counter()
        self._vis_sum = self._hid_sum = 0.0
        self._both = 0

    def observe(
        self, samples: Sequence[Sample], results: Sequence[RewardResult], step: int
    ) -> dict[str, float]:
        """Metrics of this step: reward/flag/<flag> counts, masked count, pass rates, gap."""
        s = self._summary
        s.steps += 1
        s.samples += len(results)
        step_flags: Counter[str] = Counter()
        vis = hid = 0.0
        both = 0
        for i, (sample, r) in enumerate(zip(samples, results, strict=True)):
            s.masked += r.masked
            step_flags.update(f.value for f in r.flags)
            if sample.visible_result is not None and sample.result is not None:
                both += 1
                vis += sample.visible_result.pass_rate
                hid += sample.result.pass_rate
            if r.flags:
                if len(s.flagged) < self.keep:
                    s.flagged.append(
                        FlaggedSample(
                            step,
                            i,
                            sample.task.id,
                            tuple(sorted(f.value for f in r.flags)),
                            r.score,
                            r.masked,
                            r.reason,
                            (sample.program or "")[:EXCERPT_CHARS],
                        )
                    )
                else:
                    s.flagged_dropped += 1
        self._flags.update(step_flags)
        self._vis_sum, self._hid_sum, self._both = (
            self._vis_sum + vis,
            self._hid_sum + hid,
            self._both + both,
        )
        metrics = {f"reward/flag/{f.value}": float(step_flags.get(f.value, 0)) for f in Flag}
        metrics["reward/masked"] = float(sum(r.masked for r in results))
        scored = [r.score for r in results if not r.masked]
        metrics["reward/mean"] = sum(scored) / len(scored) if scored else 0.0
        if both:
            metrics["reward/visible_pass_rate"] = vis / both
            metrics["reward/hidden_pass_rate"] = hid / both
            metrics["reward/visible_hidden_gap"] = (vis - hid) / both
        return metrics

    def summary(self) -> RunSummary:
        s = self._summary
        s.flag_counts = dict(sorted(self._flags.items()))
        if self._both:
            s.visible_pass_rate = self._vis_sum / self._both
            s.hidden_pass_rate = self._hid_sum / self._both
            s.visible_hidden_gap = s.visible_pass_rate - s.hidden_pass_rate
            s.gap_alarm = s.visible_hidden_gap >= self.gap_alarm
        return s
