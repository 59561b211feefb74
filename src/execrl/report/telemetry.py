"""The training run's telemetry beyond metrics.jsonl: the observer `execrl train` hands to
`rl.run.train` (which, a lower layer, never imports this one; see `execrl.cli.train_command`).

    telemetry = Telemetry(run_dir, config, tasks, first_step, enabled=rank == 0)  # at start
    telemetry.step(row, collected)   # each step: trackers, example completions
    telemetry.end(summary)           # at the end: close trackers, build the report

Trackers (TensorBoard by default; W&B, MLflow on request) are chosen by `run.trackers` or
`EXECRL_TRACKERS` (see `report.trackers`); a missing package is an error before any step.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from execrl.report import examples as ex
from execrl.report.trackers import open_trackers, tracker_names


class Telemetry:
    def __init__(
        self,
        run_dir: Path,
        config: Any,
        tasks: Sequence[Any],
        first_step: int = 0,
        enabled: bool = True,
        trackers: str | None = None,
        examples_per_step: int = 2,
    ) -> None:
        self.run_dir, self.tasks, self.enabled, self.k = (
            Path(run_dir),
            tasks,
            enabled,
            examples_per_step,
        )
        self.trackers: list = []
        self.examples: ex.ExampleLog | None = None
        if not enabled:
            return
        names = tracker_names(trackers)
        as_dict = dataclasses.asdict(config) if dataclasses.is_dataclass(config) else dict(config)
        self.trackers = open_trackers(names, self.run_dir, as_dict, first_step)
        self.examples = ex.ExampleLog(self.run_dir / "examples.jsonl", keep_steps=first_step)

    def step(self, row: Mapping[str, Any], collected: Any) -> None:
        """`collected`: the step's `rl.rollout.groups.Gathered`; its local groups give the
        examples."""
        if not self.enabled:
            return
        for tracker in self.trackers:
            tracker.log(row, int(row["step"]))
        if self.examples is not None:
            step = int(row["step"])
            self.examples.write(ex.pick(step, collected.local, self.tasks, self.k, self.run_dir))

    def end(self, summary: Mapping[str, Any] | None = None) -> Path | None:
        """Close the trackers and write the report; returns report.html's path. The policy and
        summary are already saved: a report that cannot be drawn is a warning, not a lost run."""
        if not self.enabled:
            return None
        for tracker in self.trackers:
            tracker.close()
        self.trackers = []
        from execrl.report.build import build_report

        try:
            return build_report(self.run_dir).html
        except Exception as e:  # noqa: BLE001 - reported, and rebuildable from the files
            print(
                f"execrl: could not build the report in {self.run_dir} ({type(e).__name__}: {e}); "
                f"rebuild it with `execrl report {self.run_dir}`",
                file=sys.stderr,
            )
            return None
