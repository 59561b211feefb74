"""What a person watching a run sees: progress, warnings, and a clean stop on Ctrl-C or SIGTERM.

On a terminal a progress bar (step, reward, pass rate, steps/s, time left); otherwise a one-line
summary every `every` steps, so a log file shows the run moving. Both show where the last step's
time went: generate (sampling), score (building, running and rewarding the programs, which
overlaps generation) and update seconds, `time/generate_s`, `time/execute_s` and `time/update_s`
of metrics.jsonl. Warnings name what to change.
"""

from __future__ import annotations

import os
import shlex
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

IDLE_WARN_STEPS = 3  # consecutive steps with no update before a run says it is idling


class Progress:
    def __init__(self, total: int, first: int, quiet: bool, log: Callable[[str], None]) -> None:
        self.total, self.first, self.log = total, first, log
        self.start = time.perf_counter()
        self.bar: Any = None
        self.every = 0  # 0: silent
        if quiet:
            return
        if sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=first, desc="train", unit="step", file=sys.stderr)
        else:
            self.every = max(1, (total - first) // 20)

    def step(self, row: dict[str, Any]) -> None:
        step = int(row["step"]) + 1
        if self.bar is not None:
            self.bar.set_postfix_str(
                f"reward={row['reward_mean']:.3f}, pass_rate={row['pass_rate']:.2f}, "
                + step_times(row)
            )
            self.bar.update(1)
            if step >= self.total:
                self.bar.close()
        elif self.every and ((step - self.first) % self.every == 0 or step == self.total):
            done = step - self.first
            rate = done / max(1e-9, time.perf_counter() - self.start)
            left = (self.total - step) / rate if rate else 0.0
            self.log(
                f"step {step}/{self.total}  reward {row['reward_mean']:.3f}  pass rate "
                f"{row['pass_rate']:.2f}  groups kept {row['groups_kept']}  {pace(rate)}  "
                f"{_duration(left)} left  ({step_times(row)})"
            )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def pace(steps_per_s: float) -> str:
    """'2.50 steps/s', or '45.2 s/step' for steps slower than one a second: a step of minutes
    read as '0.00 steps/s', a run that seemed stalled."""
    if steps_per_s >= 1:
        return f"{steps_per_s:.2f} steps/s"
    return f"{1 / max(steps_per_s, 1e-9):.1f} s/step"


def command_as_run() -> str:
    """The command this process was started as, for a line a person pastes into a fresh shell:
    argv[0] as typed (`.venv/bin/execrl`; a bare `execrl` a shell found on its PATH is the
    path it found), `python -m execrl.cli` as this interpreter's; `execrl` when no command line
    started the run (rl.run.train from Python)."""
    argv0 = sys.argv[0] if sys.argv else ""
    if os.path.basename(argv0) == "execrl":
        return shlex.quote(argv0)
    if argv0.endswith(os.path.join("execrl", "cli", "__main__.py")):
        return f"{shlex.quote(sys.executable)} -m execrl.cli"
    return "execrl"


def step_times(row: dict[str, Any]) -> str:
    """Where a step's time went, from its metrics row: 'generate 1.2 s, score 0.4 s, ...', and
    the process's resident memory after it."""
    parts = (("generate", "time/generate_s"), ("score", "time/execute_s"),
             ("update", "time/update_s"))  # fmt: skip
    times = ", ".join(f"{name} {row.get(key, 0.0):.1f} s" for name, key in parts)
    # resident memory beside the times: a run creeping toward the machine's limit shows it
    return times + (f", rss {row['mem/rss_gib']:.1f} GiB" if "mem/rss_gib" in row else "")


def _duration(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m // 60}h{m % 60:02d}m" if m >= 60 else f"{m}m{s:02d}s"


class IdleWatch:
    """Says so when updates are skipped step after step (dynamic sampling dropping every group,
    or nothing left to count), instead of idling silently."""

    def __init__(self, log: Callable[[str], None], dynamic_sampling: bool) -> None:
        self.log, self.dynamic = log, dynamic_sampling
        self.streak = 0

    def step(self, row: dict[str, Any]) -> None:
        idle = row["groups_kept"] == 0 or row.get("skipped_update", 0.0) == 1.0
        self.streak = self.streak + 1 if idle else 0
        row["idle_steps"] = self.streak
        if self.streak == IDLE_WARN_STEPS:
            why = (
                "dynamic sampling dropped every group (all rewards in each group equal): the "
                "tasks are too easy or too hard for the policy; try rl.max_sample_rounds, "
                "another data.difficulty, or rl.dynamic_sampling = false"
                if self.dynamic and row["groups_kept"] == 0
                else "no sample counted (all masked or empty); check sandbox errors in the log"
            )
            self.log(f"warning: no update for {self.streak} steps in a row: {why}")


def setup_warnings(config: Any) -> list[str]:
    """Settings that run but cannot learn, found before the model loads."""
    out = []
    if config.sampling.temperature == 0 and config.algorithm.group_relative:
        out.append(
            f"warning: sampling.temperature = 0 with rl.algorithm = {config.rl.algorithm!r}: "
            "every completion of a group is the same, so every group-relative advantage is "
            "zero and nothing is learned; use a temperature above 0 (the default is 0.5)"
        )
    return out


class StopRequest:
    """Ctrl-C or SIGTERM asks the run to stop after the current step, save a checkpoint and say
    how to resume; a second one abandons the step at once (KeyboardInterrupt)."""

    def __init__(self) -> None:
        self.requested = False
        self._old: dict[int, Any] = {}

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        print(
            f"\n{signal.Signals(signum).name}: stopping after this step and saving a checkpoint "
            "(again to abandon the step at once)",
            file=sys.stderr,
            flush=True,
        )

    def __exit__(self, *exc: object) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)
