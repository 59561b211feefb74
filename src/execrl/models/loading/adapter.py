"""A LoRA adapter directory as a model: the base it names, with the adapter merged in.

`execrl train` with LoRA saves final/ merged by default (`run.merge_lora`), a full Hugging Face
directory that `execrl eval` and vLLM load as they are. With `run.merge_lora = false` final/ holds
only the adapter (`adapter_config.json`, `adapter_model.safetensors`) and the tokenizer; its
`base_model_name_or_path` names the base, which `load_policy` then loads and merges this adapter
into, so `execrl eval --model RUN/final` works either way. Merging gives the generation path a
plain model, which execrl's own decoder runs (`models.engines.lean_llama`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ADAPTER_CONFIG = "adapter_config.json"


def adapter_base(name: str) -> str | None:
    """The base model an adapter directory names, or None when `name` is not one (a directory
    with its own config.json is a full model, whatever else it holds)."""
    path = Path(name).expanduser()
    config = path / ADAPTER_CONFIG
    if not config.is_file() or (path / "config.json").is_file():
        return None
    try:
        base = json.loads(config.read_text()).get("base_model_name_or_path")
    except (json.JSONDecodeError, AttributeError) as exc:
        raise ValueError(f"{config}: not a PEFT adapter config ({exc})") from None
    if not isinstance(base, str) or not base:
        raise ValueError(
            f"{config}: base_model_name_or_path is empty, so the adapter's base model is "
            "unknown; write the base's directory or hub id there"
        )
    if base.startswith((".", "/", "~")) and not Path(base).expanduser().is_dir():
        raise FileNotFoundError(
            f"{config}: the adapter's base model {base} is not there (moved or deleted?); "
            "write its new directory or its hub id in base_model_name_or_path"
        )
    return base


def merged_adapter(base_model: Any, directory: str) -> Any:
    """`base_model` with the adapter of `directory` merged into its weights: a plain model."""
    try:
        from peft import PeftModel
    except ImportError as e:
        raise ImportError(
            f"{directory} holds a LoRA adapter, which needs PEFT to load: "
            "pip install 'execrl[lora]' (or train with run.merge_lora = true)"
        ) from e
    return PeftModel.from_pretrained(base_model, directory).merge_and_unload()


def absolute_base(model: Any) -> None:
    """Before saving an unmerged adapter: name a local base by its absolute path, so the
    adapter loads from any working directory."""
    for config in getattr(model, "peft_config", {}).values():
        base = Path(str(config.base_model_name_or_path or "")).expanduser()
        if str(base) and base.is_dir():
            config.base_model_name_or_path = str(base.resolve())
