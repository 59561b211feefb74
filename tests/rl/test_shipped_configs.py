"""Every config shipped under configs/ loads and validates (unknown keys and wrong types fail)."""

from __future__ import annotations

import dataclasses
import importlib.util
import tomllib
from pathlib import Path

import pytest

from execrl.rl.config.config import TrainConfig, load_config

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.toml"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_shipped_config_loads(path, monkeypatch):
    import torch

    # A GPU recipe is checked as on the GPU machine it is for (on a CPU-only torch, its
    # model.device = "cuda" is the one-line error tests/test_cli_errors.py covers).
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)
    # A vLLM recipe likewise, as where vLLM is installed (its own environment on a CPU); without
    # it, its one-line install hint is tests/models/test_vllm_engine.py's
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: object() if name == "vllm" else find_spec(name, *a))  # fmt: skip
    sections = {f.name for f in dataclasses.fields(TrainConfig)}
    if "dist" in tomllib.loads(path.read_text()) and "dist" not in sections:
        pytest.skip("[dist] (dist.strategy = 'fsdp') arrives with FSDP, issue 31 items 1-3")
    config = load_config(path)
    assert config.model.path and config.run.steps > 0


def test_there_is_a_real_model_config():
    assert any("qwen" in p.name for p in CONFIGS)
