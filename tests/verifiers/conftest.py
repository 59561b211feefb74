"""One sandbox for the verifier tests."""

from __future__ import annotations

import pytest

from execrl.sandbox import Sandbox


@pytest.fixture(scope="package")
def sandbox():
    with Sandbox(workers=2) as sb:
        yield sb


@pytest.fixture
def data_env(data_dir, monkeypatch):
    """The benchmark data named as a user names it for the suites, which read EXECRL_DATA_DIR
    (testgen's functions come from MBPP and HumanEval): a fresh clone's run has ../shared/data
    beside it and no EXECRL_DATA_DIR."""
    monkeypatch.setenv("EXECRL_DATA_DIR", str(data_dir))
    return data_dir
