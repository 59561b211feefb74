"""The one typed config of `execrl sft`, in `execrl train`'s style: TOML sections, then
`--set section.field=value`, unknown keys and wrong types errors naming the key, all checked
before a model loads. [model] and [optim] are `execrl train`'s own sections (`rl.config.config`), so
a model and an optimizer are described (and the optimizer made, `rl.setup`) the same way for both
stages.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from execrl.rl.config.config import CHOICES, OptimConfig
from execrl.rl.config.model_config import ModelConfig, check_model, resolve_dtype
from execrl.rl.files import toml_config
from execrl.rl.files.toml_config import (
    ConfigError,
    checked_table,
    read_toml,
    source_name,
    with_overrides,
)


@dataclass
class SFTDataConfig:
    # JSONL, one example a line: {"prompt": str, "completion": str}, or {"messages": [{"role",
    # "content"}, ...]} ending with the assistant's turn (the prompt is the chat template applied
    # to the turns before it). The loss is on the completion tokens only.
    train: str = ""
    max_tokens: int = 1024  # longer examples are left out, and counted in summary.json


@dataclass
class SFTRunConfig:
    steps: int = 100
    batch_size: int = 8  # examples per step, drawn without replacement within a step
    # > 0: the step's examples go forward and backward this many at a time, the gradients
    # accumulated (the same step in less memory: a real model's long examples need it); 0: all
    micro_batch_size: int = 0
    seed: int = 0
    out_dir: str = "runs"  # run directories are created under it
    name: str = ""  # run directory name; default: a timestamp
    checkpoint_every: int = 0  # steps between checkpoints (for --resume); 0: only at the end
    # Where per-step metrics go besides metrics.jsonl, as `execrl train`'s run.trackers.
    trackers: str = "none"


@dataclass
class SFTConfig:
    # path, dtype, device, pad_token, chat, lora_r...: as `execrl train`. With LoRA, final/
    # holds the merged model, so it is a model directory `execrl train` loads as model.path.
    model: ModelConfig = field(default_factory=ModelConfig)
    data: SFTDataConfig = field(default_factory=SFTDataConfig)
    optim: OptimConfig = field(default_factory=lambda: OptimConfig(lr=1e-4, weight_decay=0.01))
    run: SFTRunConfig = field(default_factory=SFTRunConfig)


# What --resume may change: how long the run goes on, where its metrics go, torch's threads.
RESUMABLE = ("run.steps", "run.checkpoint_every", "run.trackers", "model.threads")


def sft_config_for(
    path: str | None, overrides: list[str] | tuple[str, ...], resume: Path | None
) -> SFTConfig:
    """What `execrl sft` runs: a resumed run's saved config (`resume`), or else the defaults, the
    TOML file at `path` and the overrides; checked, its data file found, before a model loads."""
    if resume is not None:
        if path:
            raise ConfigError("--resume continues with the run's saved config; drop --config")
        config = resume_sft_config(resume, overrides)
    else:
        config = load_sft_config(path, overrides)
    if not Path(config.data.train).is_file():
        raise ConfigError(f"data.train: no such file {config.data.train}")
    return config


def load_sft_config(
    path: str | Path | None, overrides: list[str] | tuple[str, ...] = ()
) -> SFTConfig:
    """Defaults, then the TOML file, then each override, checked."""
    return from_dict(with_overrides(read_toml(path), overrides), source_name(path, overrides))


def from_dict(data: dict[str, Any], where: str) -> SFTConfig:
    config = SFTConfig()
    sections = {f.name for f in dataclasses.fields(SFTConfig)}
    for section, values in data.items():
        if section not in sections:
            raise ConfigError(f"{where}: unknown section [{section}]; known: {', '.join(sections)}")
        if not isinstance(values, dict):
            raise ConfigError(f"{where}: [{section}] must be a table")
        target = getattr(config, section)
        checked = checked_table(target, section, values, where)
        setattr(config, section, dataclasses.replace(target, **checked))
    resolve_dtype(config.model, this_machine=True)
    validate(config, where)
    return config


def validate(config: SFTConfig, where: str) -> None:
    for (section, name), choices in CHOICES.items():
        if section in ("model", "optim"):
            value = getattr(getattr(config, section), name)
            if value not in choices:
                raise ConfigError(f"{where}: {section}.{name} = {value!r}; choose from {choices}")
    if not config.data.train:
        raise ConfigError(f"{where}: data.train is empty; give a JSONL file of examples")
    positive = {
        "run.steps": config.run.steps,
        "run.batch_size": config.run.batch_size,
        "data.max_tokens": config.data.max_tokens,
        "optim.lr": config.optim.lr,
    }
    for key, value in positive.items():
        if value <= 0:
            raise ConfigError(f"{where}: {key} must be positive, got {value!r}")
    if config.run.micro_batch_size < 0:
        raise ConfigError(f"{where}: run.micro_batch_size must be 0 (the whole batch) or more")
    if config.run.checkpoint_every < 0 or config.model.lora_r < 0 or config.model.threads < 0:
        raise ConfigError(
            f"{where}: run.checkpoint_every, model.lora_r and model.threads cannot be negative"
        )
    check_model(config.model, where, this_machine=True)


def to_toml(config: SFTConfig) -> str:
    return toml_config.to_toml(dataclasses.asdict(config))


def resume_sft_config(run_dir: Path, overrides: list[str] | tuple[str, ...]) -> SFTConfig:
    """The run's saved config with the overrides a resumed run honours (RESUMABLE)."""
    saved = run_dir / "config.toml"
    if not saved.is_file():
        raise ConfigError(f"--resume {run_dir}: no config.toml there; is it an sft run directory?")
    before = dataclasses.asdict(from_dict(read_toml(saved), str(saved)))
    after = from_dict(with_overrides(read_toml(saved), overrides), str(saved))
    changed = [
        f"{s}.{k}" for s, v in dataclasses.asdict(after).items() for k in v if v[k] != before[s][k]
    ]
    refused = [key for key in changed if key not in RESUMABLE]
    if refused:
        raise ConfigError(
            f"--resume {run_dir}: cannot change {', '.join(refused)}; a resumed run takes "
            f"--set {', '.join(RESUMABLE)}"
        )
    return after
