"""What a `web` run saw, read from its `web.json` and screenshots into typed records.

The driver (`web_driver.py`) writes the file inside the sandbox; it is read here as untrusted
data: every field is checked for its type, and a file that is missing, malformed, or carries
another key than the run was given is no observation at all (the run's failure, never a
partial pass).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from execrl.sandbox.grading.artifacts import ArtifactSpec, ProgramRun

RESULT = ArtifactSpec("web.json", "json", 256 << 10)
MAX_PAGES = 8  # screenshots collected back, one per page opened
SHOTS = tuple(ArtifactSpec(f"shot-{i}.png", "image", 1 << 20) for i in range(MAX_PAGES))


@dataclass(frozen=True, slots=True)
class PageSeen:
    path: str
    status: int  # the HTTP status of the page's load (0: it never answered)
    error: str  # why the load, the link scan or the screenshot failed ("" if none)
    links: tuple[str, ...]  # every <a href> on it, resolved to absolute URLs
    shot: bytes | None  # its screenshot (PNG), when it was taken


@dataclass(frozen=True, slots=True)
class ScenarioSeen:
    values: tuple[Any, ...]  # one per query, in order; fewer when an action or query failed
    error: str  # the action or query that failed, and why


@dataclass(frozen=True, slots=True)
class Seen:
    status: str  # "ok", "deadline" (the driver's time ran out) or "error: ..."
    pages: tuple[PageSeen, ...]
    element_counts: tuple[int, ...]  # per spec element check (-1: its page did not load)
    scenarios: tuple[ScenarioSeen, ...]
    failed_requests: tuple[str, ...]  # requests the site could not serve, in order
    js_errors: tuple[str, ...]  # uncaught exceptions of its pages


def read_seen(run: ProgramRun, key: str) -> Seen | str:
    """The run's observation, or why there is none (for the feedback)."""
    artifact = run.artifacts.get(RESULT.path)
    if artifact is None:
        if not run.ran:
            return f"the browser run did not finish: {run.message or run.result.verdict.value}"
        return "the browser run wrote no result"
    try:
        data = json.loads(artifact.data)
        if not isinstance(data, dict) or data.get("key") != key:
            return "the browser run's result is not its own"
        return _seen(data, run)
    except (ValueError, TypeError, KeyError) as exc:
        return f"the browser run's result is malformed: {exc}"


def _seen(data: dict[str, Any], run: ProgramRun) -> Seen:
    pages = []
    for i, page in enumerate(_list(data["pages"])[:MAX_PAGES]):
        shot = run.artifacts.get(SHOTS[i].path)
        pages.append(
            PageSeen(
                path=_str(page["path"]),
                status=_int(page["status"]),
                error=_str(page["error"]),
                links=tuple(_str(u) for u in _list(page["links"])),
                shot=shot.data if shot is not None else None,
            )
        )
    scenarios = tuple(
        ScenarioSeen(tuple(_list(s["values"])), _str(s["error"])) for s in _list(data["scenarios"])
    )
    return Seen(
        status=_str(data["status"]),
        pages=tuple(pages),
        element_counts=tuple(_int(c) for c in _list(data["elements"])),
        scenarios=scenarios,
        failed_requests=tuple(_str(u) for u in _list(data["failed"])),
        js_errors=tuple(_str(e) for e in _list(data["js_errors"])),
    )


def _list(value: Any) -> Sequence[Any]:
    return _of(value, list)


def _str(value: Any) -> str:
    return _of(value, str)


def _int(value: Any) -> int:
    if isinstance(value, bool):  # JSON's true is no count
        raise TypeError("expected an integer, got bool")
    return _of(value, int)


def _of(value: Any, kind: type) -> Any:
    if not isinstance(value, kind):
        raise TypeError(f"expected {kind.__name__}, got {type(value).__name__}")
    return value
