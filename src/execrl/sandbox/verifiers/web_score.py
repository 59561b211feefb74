"""The `web` verifier's cascade: structure gates function, which gates appearance.

- structure S: the fraction of the site's requirements met: each required file exists, each
  page opened loads (HTTP 200, no failure), each required element is there (`min` matches on
  load), each required link is on its page and points at a file of the site; every local link
  that points at no file, and every request the site could not serve (a missing script or
  stylesheet, anything from another origin: there is no network), is one more requirement
  unmet. S = met / (requirements + such failures).
- function F: the fraction of the scenarios' expectations met after their actions (an action
  that fails leaves its scenario's remaining expectations unmet), halved when any page threw an
  uncaught JavaScript error. F = 1 only when every expectation holds and nothing threw.
- appearance A: the mean SSIM of each page's screenshot on load against the reference's
  (`chart.image_similarity`, the chart verifier's: one home for image similarity), in [0, 1].

score = 0.3 S + 0.5 [S = 1] F + 0.2 [S = 1 and F = 1] A, and the components are the gated
terms (function 0 while structure is short of 1, appearance 0 while function is), so a reward
that reads one component alone cannot be won by a page that only looks right. PASSED when
S = F = 1: a restyled page that works passes, a little under 1.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from execrl.sandbox.verifiers.chart import image_similarity
from execrl.sandbox.verifiers.web_seen import Seen
from execrl.sandbox.verifiers.web_spec import Expectation, WebSpec

WEIGHTS = {"structure": 0.3, "function": 0.5, "appearance": 0.2}
JS_ERROR_FACTOR = 0.5


@dataclass(frozen=True, slots=True)
class Stage:
    """One stage's measure in [0, 1] and what fell short, for the feedback."""

    value: float
    problems: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Cascade:
    structure: float  # gated components: what the score is made of
    function: float
    appearance: float

    @property
    def score(self) -> float:
        return (
            WEIGHTS["structure"] * self.structure
            + WEIGHTS["function"] * self.function
            + WEIGHTS["appearance"] * self.appearance
        )

    @property
    def passed(self) -> bool:
        return self.structure == 1.0 and self.function == 1.0

    def components(self) -> dict[str, float]:
        return {
            "structure": self.structure,
            "function": self.function,
            "appearance": self.appearance,
        }


def cascade(structure: float, function: float, appearance: float) -> Cascade:
    """The gates: a stage counts only once every stage before it is complete."""
    f = function if structure == 1.0 else 0.0
    a = appearance if f == 1.0 else 0.0
    return Cascade(structure, f, a)


def local_path(url: str, origin: str) -> str | None:
    """The site path a URL names on `origin`, or None for another origin or scheme."""
    parts = urlsplit(url)
    if f"{parts.scheme}://{parts.netloc}" != origin:
        return None
    return posixpath.normpath(unquote(parts.path)).lstrip("/") or "index.html"


def structure(spec: WebSpec, files: Sequence[str], seen: Seen, origin: str) -> Stage:
    names = set(files)
    checks: list[tuple[bool, str]] = [(f in names, f"the file {f} is missing") for f in spec.files]
    loaded = {p.path: p for p in seen.pages}
    for path in spec.pages:
        page = loaded.get(path)
        ok = page is not None and page.status == 200 and not page.error
        why = page.error if page is not None and page.error else "it did not load"
        checks.append((ok, f"the page {path} failed: {why}"))
    for check, count in zip(
        spec.elements, _padded(seen.element_counts, len(spec.elements)), strict=True
    ):
        checks.append(
            (count >= check.min, f"{check.page}: too few elements match {check.selector!r}")
        )
    for link in spec.links:
        page = loaded.get(link.page)
        targets = {local_path(u, origin) for u in page.links} if page is not None else set()
        ok = link.to in targets and link.to in names
        checks.append((ok, f"{link.page} has no working link to {link.to}"))
    broken = sorted(
        {
            f"{p.path} links to {target}, which is not a file of the site"
            for p in seen.pages
            for target in (local_path(u, origin) for u in p.links)
            if target is not None and target not in names
        }
    )
    unserved = sorted({f"a request the site cannot serve: {u[:120]}" for u in seen.failed_requests})
    problems = [why for ok, why in checks if not ok] + broken + unserved
    total = len(checks) + len(broken) + len(unserved)
    met = sum(ok for ok, _ in checks)
    return Stage(met / total if total else 1.0, tuple(problems))


def function(spec: WebSpec, seen: Seen) -> Stage:
    total = sum(len(s.expectations) for s in spec.scenarios)
    right = 0
    problems: list[str] = []
    for i, (scenario, got) in enumerate(zip(spec.scenarios, seen.scenarios, strict=False)):
        for j, expectation in enumerate(scenario.expectations):
            if j < len(got.values) and matches(expectation, got.values[j]):
                right += 1
            elif j >= len(got.values):
                problems.append(f"scenario {i + 1} on {scenario.page} stopped: {got.error}")
                break
            else:
                problems.append(
                    f"scenario {i + 1} on {scenario.page}: {_name(expectation)} is wrong"
                )
    if len(seen.scenarios) < len(spec.scenarios):
        problems.append(f"only {len(seen.scenarios)} of {len(spec.scenarios)} scenarios ran")
    value = right / total if total else 1.0
    if seen.js_errors:
        value *= JS_ERROR_FACTOR
        problems.append(f"uncaught JavaScript error: {seen.js_errors[0][:200]}")
    return Stage(value, tuple(problems))


def appearance(seen: Seen, reference: Seen, pages: Sequence[str]) -> Stage:
    mine = {p.path: p.shot for p in seen.pages}
    theirs = {p.path: p.shot for p in reference.pages}
    scores = []
    for path in pages:
        got, want = mine.get(path), theirs.get(path)
        scores.append(image_similarity(got, want) if got and want else 0.0)
    value = sum(scores) / len(scores) if scores else 0.0
    return Stage(value, (f"looks {value:.0%} like the reference (SSIM)",) if value < 1.0 else ())


def matches(expectation: Expectation, value: Any) -> bool:
    want = expectation.value
    if expectation.what == "text":
        return isinstance(value, str) and _norm(value) == _norm(want)
    if expectation.what == "contains":
        return isinstance(value, str) and _norm(want) in _norm(value)
    if expectation.what == "value":
        return isinstance(value, str) and value.strip() == str(want).strip()
    if expectation.what == "texts":
        return (
            isinstance(value, list)
            and isinstance(want, list)
            and [_norm(v) for v in value] == [_norm(w) for w in want]
        )
    if expectation.what == "count":
        return isinstance(value, int) and not isinstance(value, bool) and value == want
    return value == want  # visible, checked (booleans), url (a path)


def _norm(text: Any) -> str:
    return " ".join(str(text).split()).casefold()


def _name(expectation: Expectation) -> str:
    if expectation.what == "url":
        return "the page shown"
    return f"{expectation.selector!r}'s {expectation.query}"


def _padded(values: Sequence[int], n: int) -> list[int]:
    return [*values[:n], *([-1] * (n - len(values)))]
