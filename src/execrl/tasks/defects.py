"""Upstream defects: reference solutions that fail their own benchmark's tests, with the
reason. `execrl tasks validate` reports them as known; tests/tasks pin this list to what
validation actually finds, so an entry can neither go stale nor hide a new failure."""

from __future__ import annotations

KNOWN_DEFECTS: dict[str, dict[str, str]] = {}
