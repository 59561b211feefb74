"""The `web` verifier's task data, read into typed records, and the plan a run is given.

spec (plain JSON, docs/verifiers.md):
- `reference`: the reference site, in the answer format (`tasks.suites.web_answer`);
- `files`: the files the site must have;
- `pages`: the pages opened for structure and appearance, the entry page first;
- `elements`: `{"page", "selector", "min"}`: at least `min` (default 1) elements match on load;
- `links`: `{"page", "to"}`: the page has an `<a href>` to the file `to`;
- `scenarios`: `{"page", "actions", "expect"}`: on a fresh load of the page, the actions in
  order (`{"do": "click" | "fill" | "press" | "check" | "select", "selector", "text"}`), then
  each expectation: `{"selector", "text": S}` (the element's rendered text, whitespace folded),
  `"contains": S` (that text holds S, case folded), `"value": S` (a form field's value),
  `"texts": [S, ...]` (every match's text, in order), `"count": N`, `"visible": B`,
  `"checked": B`, or `{"url": PATH}` (the page shown, after a link was followed);
- `viewport`: `[width, height]` of the screenshots (default 400 x 300).

What enters the sandbox is `plan_of(spec)`: the pages, the selectors and the actions. The values
expected (`expect`'s, `min`, the links' targets) stay here, in the parent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from execrl.sandbox.verifiers.base import VerifierSpecError

ACTIONS = ("click", "fill", "press", "check", "select")
EXPECTS = ("text", "contains", "value", "texts", "count", "visible", "checked", "url")
DEFAULT_VIEWPORT = (400, 300)


@dataclass(frozen=True, slots=True)
class Action:
    do: str  # one of ACTIONS
    selector: str
    text: str = ""  # what `fill` types, the key `press` presses, the option `select` picks


@dataclass(frozen=True, slots=True)
class Expectation:
    what: str  # one of EXPECTS
    selector: str  # "" for `url`
    value: Any  # compared in the parent only

    @property
    def query(self) -> str:
        """What the run reads for it (`contains` reads the text)."""
        return "text" if self.what == "contains" else self.what


@dataclass(frozen=True, slots=True)
class Scenario:
    page: str
    actions: tuple[Action, ...]
    expectations: tuple[Expectation, ...]


@dataclass(frozen=True, slots=True)
class ElementCheck:
    page: str
    selector: str
    min: int


@dataclass(frozen=True, slots=True)
class LinkCheck:
    page: str
    to: str


@dataclass(frozen=True, slots=True)
class WebSpec:
    reference: str
    files: tuple[str, ...]
    pages: tuple[str, ...]
    elements: tuple[ElementCheck, ...]
    links: tuple[LinkCheck, ...]
    scenarios: tuple[Scenario, ...]
    viewport: tuple[int, int]


def parse_spec(task_id: str, spec: Mapping[str, Any]) -> WebSpec:
    """The records of a task's spec; VerifierSpecError names the task and the field."""
    read = _Reader(task_id)
    pages = tuple(read.strings(spec, "pages"))
    if not pages:
        raise read.error("pages", "list at least the entry page")
    elements = tuple(
        ElementCheck(
            read.text(e, "page", f"elements[{i}]"),
            read.text(e, "selector", f"elements[{i}]"),
            int(read.field(e, "min", f"elements[{i}]", int, 1)),
        )
        for i, e in enumerate(read.objects(spec, "elements"))
    )
    links = tuple(
        LinkCheck(read.text(e, "page", f"links[{i}]"), read.text(e, "to", f"links[{i}]"))
        for i, e in enumerate(read.objects(spec, "links"))
    )
    scenarios = tuple(
        _scenario(read, s, f"scenarios[{i}]") for i, s in enumerate(read.objects(spec, "scenarios"))
    )
    viewport = spec.get("viewport", list(DEFAULT_VIEWPORT))
    if (
        not isinstance(viewport, list)
        or len(viewport) != 2
        or not all(isinstance(v, int) and 16 <= v <= 1600 for v in viewport)
    ):
        raise read.error("viewport", "must be [width, height], each 16 to 1600 pixels")
    return WebSpec(
        reference=read.text(spec, "reference", ""),
        files=tuple(read.strings(spec, "files")),
        pages=pages,
        elements=elements,
        links=links,
        scenarios=scenarios,
        viewport=(viewport[0], viewport[1]),
    )


def plan_of(spec: WebSpec) -> dict[str, Any]:
    """What a run is told to do: no expected value is in it."""
    return {
        "viewport": list(spec.viewport),
        "pages": list(spec.pages),
        "elements": [{"page": e.page, "selector": e.selector} for e in spec.elements],
        "scenarios": [
            {
                "page": s.page,
                "actions": [
                    {"do": a.do, "selector": a.selector, "text": a.text} for a in s.actions
                ],
                "queries": [{"what": x.query, "selector": x.selector} for x in s.expectations],
            }
            for s in spec.scenarios
        ],
    }


def _scenario(read: _Reader, data: Mapping[str, Any], where: str) -> Scenario:
    actions = []
    for j, a in enumerate(read.objects(data, "actions", where)):
        at = f"{where}.actions[{j}]"
        do = read.text(a, "do", at)
        if do not in ACTIONS:
            raise read.error(f"{at}.do", f"must be one of {', '.join(ACTIONS)}")
        actions.append(Action(do, read.text(a, "selector", at), read.field(a, "text", at, str, "")))
    expectations = []
    for j, e in enumerate(read.objects(data, "expect", where)):
        at = f"{where}.expect[{j}]"
        kinds = [k for k in EXPECTS if k in e]
        if len(kinds) != 1:
            raise read.error(at, f"needs exactly one of {', '.join(EXPECTS)}")
        what = kinds[0]
        selector = "" if what == "url" else read.text(e, "selector", at)
        expectations.append(Expectation(what, selector, e[what]))
    if not expectations:
        raise read.error(f"{where}.expect", "a scenario needs at least one expectation")
    return Scenario(read.text(data, "page", where), tuple(actions), tuple(expectations))


class _Reader:
    """Typed reads of the spec, each failure naming the task and the field."""

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id

    def error(self, field: str, what: str) -> VerifierSpecError:
        return VerifierSpecError(f"task {self.task_id}: the web verifier's spec.{field} {what}")

    def field(self, data: Mapping[str, Any], key: str, where: str, kind: type, default: Any) -> Any:
        value = data.get(key, default)
        if not isinstance(value, kind):
            raise self.error(f"{where}.{key}".lstrip("."), f"must be a {kind.__name__}")
        return value

    def text(self, data: Mapping[str, Any], key: str, where: str = "") -> str:
        value = data.get(key)
        if not isinstance(value, str) or not value:
            raise self.error(f"{where}.{key}".lstrip("."), "must be a non-empty string")
        return value

    def strings(self, data: Mapping[str, Any], key: str) -> list[str]:
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self.error(key, "must be a list of non-empty strings")
        return value

    def objects(
        self, data: Mapping[str, Any], key: str, where: str = ""
    ) -> list[Mapping[str, Any]]:
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            raise self.error(f"{where}.{key}".lstrip("."), "must be a list of objects")
        return value
