"""Shared test fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# -- benchmark data (../shared/data, or $EXECRL_DATA_DIR) -------------------------------------
# Tests that need it skip when it is absent, unless EXECRL_REQUIRE_DATA=1 (CI), where they fail.
_DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def shared_data_dir() -> Path | None:
    d = Path(os.environ.get("EXECRL_DATA_DIR") or _DEFAULT_DATA)
    return d if d.is_dir() else None


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The benchmark data directory; skips (or fails under EXECRL_REQUIRE_DATA=1) without it."""
    d = shared_data_dir()
    if d is None:
        msg = f"benchmark data not found at {_DEFAULT_DATA} (set EXECRL_DATA_DIR)"
        if os.environ.get("EXECRL_REQUIRE_DATA") == "1":
            pytest.fail(msg)
        pytest.skip(msg)
    return d
