"""Where per-step metrics go besides metrics.jsonl: TensorBoard, and optionally W&B or MLflow.

Chosen by the config's `run.trackers`, else the environment variable `EXECRL_TRACKERS`
(comma-separated; default `tensorboard`; `none` writes only metrics.jsonl). Weights & Biases and MLflow are never
dependencies: asking for one that is not installed is an error before training starts, naming
the package to install. W&B reads its own settings (`WANDB_PROJECT`, `WANDB_MODE`, ...) and
MLflow its own (`MLFLOW_TRACKING_URI`, `MLFLOW_EXPERIMENT_NAME`).
"""

from __future__ import annotations

import importlib.util
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

ENV = "EXECRL_TRACKERS"
DEFAULT = ("tensorboard",)


class TrackerUnavailable(RuntimeError):
    """A tracker was asked for but its package is not installed."""


class Tracker(Protocol):
    def log(self, row: Mapping[str, Any], step: int) -> None: ...

    def close(self) -> None: ...


def scalars(row: Mapping[str, Any]) -> dict[str, float]:
    """The numeric fields of a metrics row as tracker tags: plain keys under `train/`, keys that
    already name a group (`verdict/`, `flag/`, `time/`) as they are; `step` is the x axis."""
    out = {}
    for key, value in row.items():
        if key == "step" or not isinstance(value, int | float):
            continue
        out[key if "/" in key else f"train/{key}"] = float(value)
    return out


class TensorBoard:
    def __init__(self, log_dir: Path, first_step: int = 0) -> None:
        from torch.utils.tensorboard import SummaryWriter

        # purge_step: on resume, TensorBoard hides events logged after the checkpoint
        self.writer = SummaryWriter(str(log_dir), purge_step=first_step or None)

    def log(self, row: Mapping[str, Any], step: int) -> None:
        for tag, value in scalars(row).items():
            self.writer.add_scalar(tag, value, step)
        self.writer.flush()  # a step takes seconds; a crash should not lose the last ones

    def close(self) -> None:
        self.writer.close()


class WandB:
    def __init__(self, run_dir: Path, config: Mapping[str, Any]) -> None:
        import wandb

        self.run = wandb.init(
            name=run_dir.name, dir=str(run_dir), config=dict(config), resume="allow"
        )

    def log(self, row: Mapping[str, Any], step: int) -> None:
        self.run.log(scalars(row), step=step)

    def close(self) -> None:
        self.run.finish()


class MLflow:
    def __init__(self, run_dir: Path, config: Mapping[str, Any]) -> None:
        import mlflow

        self.mlflow = mlflow
        mlflow.start_run(run_name=run_dir.name)
        mlflow.log_params(_flat(config))

    def log(self, row: Mapping[str, Any], step: int) -> None:
        finite = {k: v for k, v in scalars(row).items() if math.isfinite(v)}
        self.mlflow.log_metrics(finite, step=step)

    def close(self) -> None:
        self.mlflow.end_run()


PACKAGES = {"tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow"}


def tracker_names(spec: str | None = None) -> tuple[str, ...]:
    """Parse `spec` (the config's `run.trackers`) or else `EXECRL_TRACKERS`; unknown names and
    missing packages are errors naming where the setting came from."""
    origin = "run.trackers" if spec is not None else ENV
    spec = os.environ.get(ENV) if spec is None else spec
    if spec is None or not spec.strip():
        names = DEFAULT
    else:
        names = tuple(n.strip().lower() for n in spec.split(",") if n.strip())
    if names == ("none",):
        return ()
    for name in names:
        if name not in PACKAGES:
            raise ValueError(
                f"{origin}={spec!r}: unknown tracker {name!r}; choose from "
                f"{', '.join(PACKAGES)} (comma-separated) or 'none'"
            )
        if importlib.util.find_spec(PACKAGES[name]) is None:
            raise TrackerUnavailable(
                f"{origin} asks for {name}, but the {PACKAGES[name]!r} package is not installed: "
                f"`pip install {PACKAGES[name]}`, or remove {name} from {origin}"
            )
    return names


def open_trackers(
    names: tuple[str, ...], run_dir: Path, config: Mapping[str, Any], first_step: int = 0
) -> list[Tracker]:
    makers = {
        "tensorboard": lambda: TensorBoard(run_dir / "tensorboard", first_step),
        "wandb": lambda: WandB(run_dir, config),
        "mlflow": lambda: MLflow(run_dir, config),
    }
    return [makers[n]() for n in names]


def _flat(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in config.items():
        if isinstance(value, Mapping):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = str(value)
    return out
