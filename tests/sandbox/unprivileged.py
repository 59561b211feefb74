"""The user-namespace path's tests (the sandbox as a user without root) run as `nobody`, which
this process becomes with `setpriv`. Where that cannot be done they skip, except in CI
(EXECRL_REQUIRE_USERNS=1, set by .ci/run), where they fail: a test that skipped for a broken
probe (an import the probe script made that had moved) hid the path from CI before."""

from __future__ import annotations

import os

import pytest


def cannot_run_as_nobody(reason: str) -> None:
    """Skip the test for `reason`, or fail it under EXECRL_REQUIRE_USERNS=1."""
    if os.environ.get("EXECRL_REQUIRE_USERNS") == "1":
        pytest.fail(f"the user-namespace tests must run here (EXECRL_REQUIRE_USERNS=1): {reason}")
    pytest.skip(reason)
