"""The diagram verifier's structure and score, by hand: what a render's labels and edges are,
their agreement with the reference's, and the weighted score (no renderer needed)."""

from __future__ import annotations

import io
import json

import pytest

from execrl.sandbox.verifiers.diagram import Render, score
from execrl.sandbox.verifiers.diagram_render import tex_checks, tikz_body
from execrl.sandbox.verifiers.diagram_structure import (
    Edge,
    Structure,
    agreement,
    dot_structure,
    f1,
    tikz_structure,
)


def _text(text: str) -> list[dict]:
    return [{"op": "F", "size": 14.0}, {"op": "T", "pt": [0, 0], "text": text}]


def _layout(directed: bool = True, image: bool = False) -> bytes:
    """A `dot -Tjson` layout: nodes 0 'Start', 1 'load  data', 2 invisible (draws no text), an
    edge 0 -> 1 labelled 'go', an invisible edge 1 -> 2 (no _draw_), an edge 1 -> 0."""
    start = {"_gvid": 0, "name": "s", "_ldraw_": _text("Start")}
    if image:
        start["image"] = "reference.png"
    return json.dumps(
        {
            "directed": directed,
            "objects": [
                {"_gvid": 3, "name": "cluster_a", "nodes": [0], "_ldraw_": _text("Group")},
                start,
                {"_gvid": 1, "name": "l", "_ldraw_": _text("load  data")},
                {"_gvid": 2, "name": "x", "_draw_": [{"op": "e"}]},
            ],
            "edges": [
                {"tail": 0, "head": 1, "_draw_": [{"op": "b"}], "_ldraw_": _text("go")},
                {"tail": 1, "head": 2},
                {"tail": 1, "head": 0, "_draw_": [{"op": "b"}]},
            ],
        }
    ).encode()


def test_dot_structure_reads_drawn_labels_and_visible_edges():
    got = dot_structure(_layout())
    # Labels: the cluster's, the two nodes' (normalised), the edge's; node 2 drew none.
    assert got.labels == ("go", "group", "load data", "start")
    assert got.edges == (Edge("load data", "start"), Edge("start", "load data", "go"))
    assert not got.drew_image
    # Undirected: each edge's ends sorted, so 1 -- 0 and 0 -- 1 are the same edge.
    undirected = dot_structure(_layout(directed=False))
    assert undirected.edges == (Edge("load data", "start"), Edge("load data", "start", "go"))
    assert dot_structure(_layout(image=True)).drew_image


def test_f1_of_multisets_by_hand():
    assert f1([], []) == 1.0
    assert f1(["a"], []) == 0.0
    # got {a, a, b}, want {a, b, c}: common {a, b} = 2; 2 * 2 / (3 + 3) = 2/3
    assert f1(["a", "a", "b"], ["a", "b", "c"]) == pytest.approx(2 / 3)


def test_one_node_holding_all_the_text_agrees_with_nothing():
    want = Structure(("a", "b", "c"), (Edge("a", "b"), Edge("b", "c")))
    lump = Structure(("a b c",), ())
    assert agreement(lump, want).nodes == 0.0 and agreement(lump, want).edges == 0.0
    # One edge reversed: labels all right; edges {a->b, c->b} vs {a->b, b->c}: 2 * 1 / 4 = 0.5
    reversed_one = Structure(("a", "b", "c"), (Edge("a", "b"), Edge("c", "b")))
    assert agreement(reversed_one, want).nodes == 1.0
    assert agreement(reversed_one, want).edges == pytest.approx(0.5)


def _png(shade: int) -> bytes:
    from PIL import Image

    image = Image.new("L", (32, 32), 255)
    for x in range(8, 24):
        image.putpixel((x, 16), shade)
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def test_score_weights_structure_over_image():
    want = Render(Structure(("a", "b", "c"), (Edge("a", "b"), Edge("b", "c"))), _png(0))
    right = score(want, want)
    assert right.score == 1.0 and right.components["image"] == pytest.approx(1.0)
    assert right.verdict.value == "PASSED"
    # Labels right, one of two edges: edges F1 = 2 * 1 / (1 + 2) = 2/3;
    # 0.4 * 1 + 0.4 * 2/3 + 0.2 * 1 = 13/15
    half = Render(Structure(("a", "b", "c"), (Edge("a", "b"),)), want.png)
    assert score(half, want).score == pytest.approx(13 / 15)
    assert score(half, want).verdict.value == "WRONG_ANSWER"
    # The reference's look without its structure: at most the image's fifth.
    lump = Render(Structure(("a b c",), ()), want.png)
    assert score(lump, want).score == pytest.approx(0.2)


# pdftotext -bbox words (top-down page points) and a pdftocairo SVG with two node borders
# (closed), an edge from 'Start' to 'Load data' (open, 56 pt), and an arrow tip (4 pt).
WORDS = b"""<doc><page width="160" height="100">
<word xMin="13.5" yMin="13.4" xMax="35.6" yMax="22.3">Start</word>
<word xMin="99.4" yMin="13.5" xMax="121.1" yMax="22.3">Load</word>
<word xMin="124.4" yMin="13.5" xMax="143.8" yMax="22.3">data</word>
<word xMin="110.3" yMin="84.0" xMax="132.9" yMax="92.9">Done</word>
</page></doc>"""
SVG = b"""<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 160 100">
<path style="fill:none;stroke:rgb(0%,0%,0%);" d="M 10 10 L 40 10 L 40 25 L 10 25 Z"/>
<path style="fill:none;stroke:rgb(0%,0%,0%);" d="M 14.6 0 L 70.9 0" transform="matrix(1,0,0,-1,24.5,17)"/>
<path style="fill:none;stroke:rgb(0%,0%,0%);" d="M -2 2 C -1.7 1 -0.8 0.3 0 0" transform="matrix(1,0,0,1,95,17)"/>
<path style="fill:rgb(0%,0%,0%);stroke:none;" d="M 0 0 L 100 80"/>
</svg>"""


def test_tikz_structure_joins_words_and_attaches_open_strokes_to_labels():
    got = tikz_structure(WORDS, SVG)
    # 'Load' and 'data' are 3.3 pt apart on one baseline (< 0.6 * 8.8): one label.
    assert got.labels == ("done", "load data", "start")
    # The edge runs from (39.1, 17) to (95.4, 17): 3.5 pt from 'Start', 4 pt from 'Load data'.
    # The closed border, the 2.8 pt arrow tip and the unstroked path are not edges.
    assert got.edges == (Edge("load data", "start"),)


def test_tex_checks_read_counts_and_treat_missing_ones_as_attempts():
    clean = tex_checks("escape 0\nrefused 0\nincluded 0\nintact 1\nraster 0\n")
    assert (clean.escapes, clean.refused, clean.included, clean.rasters) == (0, 0, 0, 0)
    assert clean.log_intact
    cut = tex_checks("escape 0\n")
    assert cut.refused == 1 and cut.included == 1 and not cut.log_intact


def test_tikz_body_takes_a_documents_body():
    doc = "\\documentclass{article}\n\\usepackage{tikz}\n\\begin{document}\nX\n\\end{document}\n"
    assert tikz_body(doc) == "X\n"
    assert tikz_body("\\begin{tikzpicture}\\end{tikzpicture}") == (
        "\\begin{tikzpicture}\\end{tikzpicture}\n"
    )
