"""A diagram's structure as it was rendered: its labels and its edges, read from the renderer's
output (never from the source text, which can say anything), and the agreement of two.

DOT (`dot -Tjson`, after layout): a node's label is the text Graphviz drew for it (its
`_ldraw_` text operations, joined by spaces), an edge is (tail's label, head's label, the
edge's drawn label), with the ends sorted for an undirected graph. A node or edge that draws
nothing (`style=invis`, an empty label) is not there. Edge labels count as labels too.

TikZ (the PDF's first page): the labels are its words (`pdftotext -bbox`) joined into runs on
one baseline whose gaps are under 0.6 of the text's height (a space is about 0.33 em; distinct
nodes sit much further apart); an edge is an open stroked subpath (`pdftocairo -svg`; closed
ones are node borders) at least `MIN_EDGE_PT` long whose two ends each lie within `NEAR_PT` of
a label's box, as the unordered pair of those labels (arrow tips are short open paths and are
left out). A PDF says nothing of direction that survives every way of drawing an arrow, so
TikZ edges are undirected.

Agreement: `nodes` and `edges` are each the F1 score of the two multisets (2 * common /
(|got| + |want|); 1.0 when both are empty), so a missing label costs as much as an extra one.
"""

from __future__ import annotations

import html
import json
import math
import re
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

MIN_EDGE_PT = 6.0  # open paths shorter than this, end to end, are arrow tips or marks
NEAR_PT = 25.0  # an edge's end this close to a label's box attaches to that label
WORD_GAP = 0.6  # words closer than this many text heights, on one baseline, are one label
_WORD = re.compile(
    r'<word xMin="([-\d.]+)" yMin="([-\d.]+)" xMax="([-\d.]+)" yMax="([-\d.]+)">(.*?)</word>'
)
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_SVG = "{http://www.w3.org/2000/svg}"


class RenderUnreadable(ValueError):
    """The renderer's output could not be read as a diagram (the program's failure)."""


@dataclass(frozen=True, slots=True, order=True)
class Edge:
    tail: str
    head: str
    label: str = ""


@dataclass(frozen=True, slots=True)
class Structure:
    labels: tuple[str, ...]  # every drawn label (nodes' and edges'), normalised, sorted
    edges: tuple[Edge, ...]  # sorted
    drew_image: bool = False  # DOT: a node asked for an image (image=, shapefile=)


@dataclass(frozen=True, slots=True)
class Agreement:
    nodes: float  # F1 of the label multisets
    edges: float  # F1 of the edge multisets


def normalise(text: str) -> str:
    return " ".join(text.split()).casefold()


def f1(got: Iterable[Any], want: Iterable[Any]) -> float:
    """2 * |common| / (|got| + |want|) over multisets; 1.0 when both are empty."""
    a, b = Counter(got), Counter(want)
    total = sum(a.values()) + sum(b.values())
    return 1.0 if total == 0 else 2 * sum((a & b).values()) / total


def agreement(got: Structure, want: Structure) -> Agreement:
    return Agreement(nodes=f1(got.labels, want.labels), edges=f1(got.edges, want.edges))


def dot_structure(layout_json: bytes) -> Structure:
    """The structure of `dot -Tjson` output."""
    try:
        graph = json.loads(layout_json)
    except ValueError as exc:
        raise RenderUnreadable(f"dot's JSON does not parse: {exc}") from None
    if not isinstance(graph, dict):
        raise RenderUnreadable("dot's JSON is not an object")
    names: dict[int, str] = {}
    labels = [_drawn_text(graph)] if _drawn_text(graph) else []
    image = False
    for obj in graph.get("objects") or []:
        text = _drawn_text(obj)
        if text:
            labels.append(text)
        if "nodes" in obj or "edges" in obj:
            continue  # a subgraph or cluster: only its label is drawn
        image = image or "image" in obj or "shapefile" in obj
        names[obj.get("_gvid", -1)] = text
    directed = bool(graph.get("directed", True))
    edges: list[Edge] = []
    for edge in graph.get("edges") or []:
        if not edge.get("_draw_"):
            continue  # style=invis
        tail, head = names.get(edge.get("tail"), ""), names.get(edge.get("head"), "")
        label = _drawn_text(edge)
        if label:
            labels.append(label)
        if not directed:
            tail, head = sorted((tail, head))
        edges.append(Edge(tail, head, label))
    return Structure(tuple(sorted(labels)), tuple(sorted(edges)), image)


def _drawn_text(obj: dict[str, Any]) -> str:
    texts = [
        str(op.get("text", ""))
        for op in obj.get("_ldraw_") or []
        if isinstance(op, dict) and op.get("op") == "T"
    ]
    return normalise(" ".join(texts))


@dataclass(frozen=True, slots=True)
class _Box:
    x0: float
    y0: float
    x1: float
    y1: float
    text: str

    def distance(self, x: float, y: float) -> float:
        dx = max(self.x0 - x, 0.0, x - self.x1)
        dy = max(self.y0 - y, 0.0, y - self.y1)
        return math.hypot(dx, dy)


def tikz_structure(words_html: bytes, paths_svg: bytes) -> Structure:
    """The structure of a TikZ render: its words' boxes and its vector paths."""
    boxes = _labels(words_html.decode("utf-8", errors="replace"))
    edges: list[Edge] = []
    for start, end in _open_strokes(paths_svg):
        if math.dist(start, end) < MIN_EDGE_PT:
            continue
        ends = [_nearest(boxes, *point) for point in (start, end)]
        if ends[0] is not None and ends[1] is not None:
            tail, head = sorted((ends[0], ends[1]))
            edges.append(Edge(tail, head))
    return Structure(tuple(sorted(b.text for b in boxes)), tuple(sorted(edges)))


def _labels(words_html: str) -> list[_Box]:
    words = [
        _Box(float(a), float(b), float(c), float(d), html.unescape(text))
        for a, b, c, d, text in _WORD.findall(words_html)
    ]
    words.sort(key=lambda w: (round(w.y1, 1), w.x0))
    runs: list[_Box] = []
    for word in words:
        last = runs[-1] if runs else None
        height = word.y1 - word.y0
        if (
            last is not None
            and abs(last.y1 - word.y1) < 0.3 * height
            and 0 <= word.x0 - last.x1 < WORD_GAP * height
        ):
            runs[-1] = _Box(
                last.x0,
                min(last.y0, word.y0),
                word.x1,
                max(last.y1, word.y1),
                last.text + " " + word.text,
            )
        else:
            runs.append(word)
    return [_Box(r.x0, r.y0, r.x1, r.y1, normalise(r.text)) for r in runs if normalise(r.text)]


def _nearest(boxes: list[_Box], x: float, y: float) -> str | None:
    best = min(boxes, key=lambda b: b.distance(x, y), default=None)
    return best.text if best is not None and best.distance(x, y) <= NEAR_PT else None


def _open_strokes(paths_svg: bytes) -> list[tuple[tuple[float, float], tuple[float, float]]]:
    """(first point, last point) of every open subpath of every stroked path, in page points."""
    try:
        root = ET.fromstring(paths_svg)
    except ET.ParseError as exc:
        raise RenderUnreadable(f"the render's SVG does not parse: {exc}") from None
    out = []
    for path in root.iter(f"{_SVG}path"):
        style = path.get("style", "")
        if "stroke:" not in style or "stroke:none" in style:
            continue
        matrix = _matrix(path.get("transform", ""))
        for start, end in _subpaths(path.get("d", "")):
            out.append((_apply(matrix, start), _apply(matrix, end)))
    return out


def _subpaths(d: str) -> list[tuple[tuple[float, float], tuple[float, float]]]:
    """Ends of the open subpaths of an absolute SVG path (M, L, C, Z: what cairo writes)."""
    out = []
    for chunk in re.split(r"(?=M)", d):
        numbers = [float(n) for n in _NUMBER.findall(chunk)]
        if len(numbers) < 4 or "Z" in chunk.upper():
            continue
        out.append(((numbers[0], numbers[1]), (numbers[-2], numbers[-1])))
    return out


def _matrix(transform: str) -> tuple[float, ...]:
    found = re.fullmatch(r"\s*matrix\(([^)]*)\)\s*", transform)
    if not found:
        return (1.0, 0.0, 0.0, 1.0, 0.0, 0.0)
    values = [float(v) for v in _NUMBER.findall(found.group(1))]
    return tuple(values) if len(values) == 6 else (1.0, 0.0, 0.0, 1.0, 0.0, 0.0)


def _apply(m: tuple[float, ...], point: tuple[float, float]) -> tuple[float, float]:
    x, y = point
    return (m[0] * x + m[2] * y + m[4], m[1] * x + m[3] * y + m[5])
