from __future__ import annotations

import pytest

import harness_processes
from execrl.sandbox import Sandbox


@pytest.fixture(scope="package")
def sandbox():
    with Sandbox(workers=2) as sb:
        yield sb


@pytest.fixture(scope="package")
def harness_pool():
    """Processes in which the official harnesses' checks run (tests/harness_processes.py)."""
    with harness_processes.pool() as pool:
        yield pool
