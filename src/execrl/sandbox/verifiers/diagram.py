"""`diagram`: a Graphviz DOT or TikZ diagram rendered in the sandbox and scored against the
task's reference diagram, rendered the same way (docs/verifiers.md).

Rendering (`diagram_render`): `dot` (-Tjson and -Tpng), or pdflatex with shell escape off and
kpathsea's paranoid file access, then poppler for the words, the vector paths and a raster;
each is a bash run confined like any program. The reference is rendered once per process and
kept in the parent's memory only: no path a program can guess holds it.

Scores (the parent compares; the runs decide nothing):
- `renders`: the diagram rendered, embeds no image and tried nothing outside its confinement,
  and drew at least one label. It gates the rest: otherwise the score is 0.
- `nodes`, `edges`: F1 of the rendered labels and of the rendered edges against the
  reference's (`diagram_structure`);
- `image`: the mean SSIM of the two grayscale rasters, the chart verifier's measure
  (`chart.image_similarity`).
Score = renders * (0.4 nodes + 0.4 edges + 0.2 image). The structure weighs most because it is
what the task asks; the image is a fifth so that a right diagram laid out otherwise still
passes near the top, and a diagram that only looks like the reference (one node holding all
the text, a picture) cannot get far. PASSED when nodes and edges both agree fully.

An embedded image fails (`renders` 0): for DOT, a node with `image=` or `shapefile=` (and
Graphviz, with file loading off, cannot load one anyway; an HTML label's `<IMG>` fails the
render); for TikZ, any raster image in the PDF or any graphics file pdftex included. TeX that
tried `\\write18`, or a path kpathsea refused (an absolute path, `..`), or whose log was
overwritten, fails too.

spec: `format` ("dot" or "tikz"), `reference` (the reference diagram; its render is the target).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from execrl.sandbox.grading.artifacts import Artifact
from execrl.sandbox.grading.job import Job
from execrl.sandbox.grading.verdict import ExecutionResult, Verdict
from execrl.sandbox.verifiers.base import (
    Verification,
    VerifierSpecError,
    VerifyRequest,
    strip_fence,
)
from execrl.sandbox.verifiers.chart import image_similarity
from execrl.sandbox.verifiers.diagram_render import (
    CHECKS,
    IMAGE,
    LAYOUT,
    PATHS,
    WORDS,
    diagram_format,
    read_render,
    render_job,
    tex_checks,
)
from execrl.sandbox.verifiers.diagram_structure import (
    RenderUnreadable,
    Structure,
    agreement,
    dot_structure,
    tikz_structure,
)

WEIGHTS = {"nodes": 0.4, "edges": 0.4, "image": 0.2}
COMPONENTS = ("renders", "nodes", "edges", "image")


@dataclass(frozen=True, slots=True)
class Render:
    """A diagram that rendered: its structure and its raster."""

    structure: Structure
    png: bytes


class DiagramVerifier:
    name = "diagram"
    components = COMPONENTS

    def __init__(self) -> None:
        self._references: dict[str, Render] = {}
        self._lock = threading.Lock()

    def jobs(self, request: VerifyRequest) -> Sequence[Job]:
        fmt = diagram_format(request)
        reference = request.field("reference", str)
        runs = [render_job(fmt, strip_fence(request.program), request)]
        with self._lock:
            known = _key(fmt, reference) in self._references
        return runs if known else [*runs, render_job(fmt, reference, request)]

    def verify(self, request: VerifyRequest, runs: Sequence[ExecutionResult]) -> Verification:
        fmt = diagram_format(request)
        key = _key(fmt, request.spec["reference"])
        if len(runs) == 2:
            ref = rendered(fmt, runs[1])
            if isinstance(ref, str):
                raise VerifierSpecError(
                    f"task {request.task_id}: the reference diagram failed: {ref}"
                )
            with self._lock:
                self._references[key] = ref
        with self._lock:
            want = self._references[key]
        artifacts = [Artifact("reference.png", "image", want.png)]
        got = rendered(fmt, runs[0])
        if isinstance(got, str):
            run = read_render(fmt, runs[0])
            verdict = Verdict.WRONG_ANSWER if run.ran else run.verdict
            zero = dict.fromkeys(COMPONENTS, 0.0)
            return Verification(0.0, zero, verdict, got, tuple(artifacts))
        artifacts.insert(0, Artifact("diagram.png", "image", got.png))
        return score(got, want, tuple(artifacts))


def score(got: Render, want: Render, artifacts: tuple[Artifact, ...] = ()) -> Verification:
    """The verification of a rendered diagram against the reference's render."""
    agree = agreement(got.structure, want.structure)
    components = {
        "renders": 1.0,
        "nodes": agree.nodes,
        "edges": agree.edges,
        "image": image_similarity(got.png, want.png),
    }
    total = sum(WEIGHTS[k] * components[k] for k in WEIGHTS)
    passed = agree.nodes == 1.0 and agree.edges == 1.0
    if passed:
        feedback = "the diagram has the asked nodes, edges and labels"
    else:
        wrong = [
            name for name, value in (("labels", agree.nodes), ("edges", agree.edges)) if value < 1
        ]
        feedback = "the diagram differs from the one asked for in its " + " and ".join(wrong)
    verdict = Verdict.PASSED if passed else Verdict.WRONG_ANSWER
    return Verification(min(1.0, round(total, 12)), components, verdict, feedback, artifacts)


def rendered(fmt: str, result: ExecutionResult) -> Render | str:
    """A run's render, or why it counts as none (it failed, embeds an image, tried to escape,
    or drew nothing)."""
    run = read_render(fmt, result)
    if not run.ran:
        said = run.result.stderr.strip()[-1500:] or run.message
        return f"the diagram did not render ({run.result.verdict.value}): {said}"
    files = run.artifacts
    png = files.get(IMAGE.path)
    if png is None:
        return "the render is missing or larger than 1 MiB"
    try:
        if fmt == "dot":
            layout = files.get(LAYOUT.path)
            if layout is None:
                return "dot's layout is missing or larger than its cap"
            structure = dot_structure(layout.data)
            if structure.drew_image:
                return "the diagram embeds an image (image= or shapefile=): it must be drawn"
        else:
            problem = _tex_problem(files.get(CHECKS.path))
            if problem:
                return problem
            words, paths = files.get(WORDS.path), files.get(PATHS.path)
            if words is None or paths is None:
                return "the render's text or paths are missing or larger than their caps"
            structure = tikz_structure(words.data, paths.data)
    except RenderUnreadable as exc:
        return str(exc)
    if not structure.labels:
        return "the diagram draws no label"
    return Render(structure, png.data)


def _tex_problem(checks: Artifact | None) -> str:
    if checks is None:
        return "the TeX run's checks are missing"
    seen = tex_checks(checks.data.decode("utf-8", errors="replace"))
    if not seen.log_intact:
        return "the TeX log was overwritten"
    if seen.escapes:
        return "the TeX source tried to run a shell command (\\write18)"
    if seen.refused:
        return "the TeX source tried to open a file outside its directory"
    if seen.included or seen.rasters:
        return "the diagram embeds an image (\\includegraphics): it must be drawn"
    return ""


def _key(fmt: str, reference: str) -> str:
    return hashlib.sha256(f"{fmt}\0{reference}".encode()).hexdigest()
