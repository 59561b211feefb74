"""One sandbox for the verifier tests."""

from __future__ import annotations

import pytest

from execrl.sandbox import Sandbox


@pytest.fixture(scope="package")
def sandbox():
    with Sandbox(workers=2) as sb:
        yield sb
