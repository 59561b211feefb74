"""Every config shipped under configs/ loads and validates (unknown keys and wrong types fail)."""

from __future__ import annotations

from pathlib import Path

import pytest

from execrl.rl.config import load_config

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.toml"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_shipped_config_loads(path):
    config = load_config(path)
    assert config.model.path and config.run.steps > 0


def test_there_is_a_real_model_config():
    assert any("qwen" in p.name for p in CONFIGS)
