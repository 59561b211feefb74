"""The diagram verifier in the sandbox: references score 1, near misses less, and each hack
(an embedded image, the look without the structure, an empty picture, a shell escape, a read
outside the run's directory, an overwritten TeX log) scores below the reference; and
`execrl tasks validate diagram` end to end."""

from __future__ import annotations

import os
import shutil

import pytest

from execrl.cli import main
from execrl.sandbox import Verdict
from execrl.sandbox.confine.isolation import ENV_PATH
from execrl.tasks.schema import VerifierTests
from verifiers.verifier_helpers import verify

TOOLS = ("dot", "pdflatex", "pdftoppm", "pdftotext", "pdftocairo", "pdfimages")
INSTALL = "apt-get install graphviz texlive-latex-base texlive-pictures poppler-utils"


@pytest.fixture(autouse=True)
def _renderers():
    """Skip without the renderers, except in CI (EXECRL_REQUIRE_TOOLS=1, set by .ci/run)."""
    missing = [t for t in TOOLS if shutil.which(t, path=ENV_PATH) is None]
    if missing:
        message = f"diagram renderers not installed ({', '.join(missing)}): {INSTALL}"
        if os.environ.get("EXECRL_REQUIRE_TOOLS") == "1":
            pytest.fail(message)
        pytest.skip(message)


DOT = 'digraph G {\n  rankdir=LR;\n  idle -> running [label="go"];\n  running -> done;\n}\n'
DOT_TESTS = VerifierTests("diagram", {"format": "dot", "reference": DOT})
TIKZ = (
    "\\begin{tikzpicture}[every node/.style={draw}, node distance=1.2cm]\n"
    "  \\node (a) {start};\n  \\node (b) [below=of a] {load data};\n"
    "  \\node (c) [below=of b] {done};\n"
    "  \\draw[->] (a) -- (b);\n  \\draw[->] (b) -- (c);\n\\end{tikzpicture}\n"
)
TIKZ_TESTS = VerifierTests("diagram", {"format": "tikz", "reference": TIKZ})


def _in_picture(body: str) -> str:
    return f"\\begin{{tikzpicture}}\n{body}\n\\end{{tikzpicture}}\n"


def test_dot_reference_scores_one_and_each_dot_hack_scores_below(sandbox):
    restyled = DOT.replace("rankdir=LR;", "node [shape=box];")  # another look, same graph
    reversed_edge = DOT.replace("running -> done", "done -> running")
    image = 'digraph G {\n  p [image="reference.png", label=""];\n  idle -> p;\n}\n'
    html_image = 'digraph G {\n  p [label=<<TABLE><TR><TD><IMG SRC="reference.png"/></TD></TR></TABLE>>];\n}\n'
    lump = 'digraph G {\n  all [shape=plaintext, label="idle running go done"];\n}\n'
    empty = "digraph G {\n}\n"
    results = verify(
        sandbox, DOT_TESTS, DOT, restyled, reversed_edge, image, html_image, lump, empty, wall_s=20
    )
    (ref, v_ref), (styled, v_styled), (rev, v_rev), *hacks = results
    assert ref.passed and v_ref.score == 1.0
    assert {a.path for a in v_ref.artifacts} == {"diagram.png", "reference.png"}
    assert styled.passed and 0.8 < v_styled.score < 1.0  # the image differs, not the structure
    # Labels right; edges {idle->running go, done->running} vs the reference's: F1 1/2.
    assert not rev.passed and v_rev.components["edges"] == pytest.approx(0.5)
    (_, v_image), (html, v_html), (_, v_lump), (_, v_empty) = hacks
    assert v_image.score == 0.0 and "embeds an image" in v_image.feedback
    # Graphviz loads no file with SERVER_NAME set: the <IMG> fails the render.
    assert html.verdict is Verdict.RUNTIME_ERROR and v_html.score == 0.0
    assert "file loading is disabled" in v_html.feedback
    assert v_lump.components["nodes"] == 0.0 and v_lump.score <= 0.2
    assert v_empty.score == 0.0 and "draws no label" in v_empty.feedback


def test_tikz_reference_scores_one_and_each_tex_hack_scores_below(sandbox):
    whole_document = (
        "\\documentclass{article}\n\\usepackage{tikz}\n\\begin{document}\n"
        + TIKZ
        + "\\end{document}\n"
    )
    missing_edge = TIKZ.replace("  \\draw[->] (b) -- (c);\n", "")
    text = "start load data done"
    hacks = [
        _in_picture("  \\node {\\includegraphics{reference.png}};"),
        _in_picture(f"  \\node[draw] {{{text}}};"),
        _in_picture("  \\path (0,0) -- (1,1);"),
        TIKZ + "\\immediate\\write18{cp ../reference.png .}\n",
        TIKZ + "\\newread\\r \\immediate\\openin\\r=/etc/passwd \\immediate\\closein\\r\n",
        TIKZ + "\\IfFileExists{../reference/candidate.tex}{}{}\n",
        # \write18, then the log overwritten to hide its runsystem line.
        TIKZ + "\\immediate\\write18{ls}\\immediate\\openout1=diagram.log\n"
        "\\immediate\\write1{This is pdfTeX}\\immediate\\closeout1\n",
    ]
    results = verify(sandbox, TIKZ_TESTS, TIKZ, whole_document, missing_edge, *hacks, wall_s=30)
    (ref, v_ref), (doc, v_doc), (miss, v_miss), *scored = results
    assert ref.passed and v_ref.score == 1.0, v_ref.feedback
    assert doc.passed and v_doc.score == 1.0  # a document's body is what is drawn
    # Every label; edges {start-load data} vs two: F1 2/3.
    assert not miss.passed and v_miss.components["edges"] == pytest.approx(2 / 3)
    image, lump, empty, escape, passwd, reference, log = (v for _, v in scored)
    assert image.score == 0.0  # reference.png is nowhere in the run: TeX stops
    assert lump.components["nodes"] == 0.0 and lump.score <= 0.2
    assert empty.score == 0.0 and "draws no label" in empty.feedback
    assert escape.score == 0.0 and "write18" in escape.feedback
    assert passwd.score == 0.0 and "outside its directory" in passwd.feedback
    assert reference.score == 0.0 and "outside its directory" in reference.feedback
    assert log.score == 0.0 and "log was overwritten" in log.feedback


def test_a_raster_drawn_without_a_file_fails(sandbox):
    """No file is needed for a raster: an inline image in the page's content stream
    (pdftex's \\pdfliteral) is found in the PDF itself (pdfimages), beside a right picture."""
    inline = "\\pdfliteral{q 10 0 0 10 0 0 cm BI /W 1 /H 1 /CS /G /BPC 8 /F /AHx ID ff> EI Q}\n"
    ((result, v),) = verify(sandbox, TIKZ_TESTS, TIKZ + inline, wall_s=30)
    assert not result.passed and v.score == 0.0 and "embeds an image" in v.feedback


def test_tasks_validate_passes_on_the_diagram_suite(capsys):
    """One task per level: two DOT tasks and one TikZ task, references and wrong solutions."""
    assert main(["tasks", "validate", "diagram:split=test,n=1"]) == 0
    out = capsys.readouterr().out
    assert "diagram:split=test,n=1: 3/3 reference solutions pass; 0 known defect(s)" in out
