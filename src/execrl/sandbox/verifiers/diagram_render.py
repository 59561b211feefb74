"""Rendering a diagram in the sandbox: Graphviz DOT with `dot`, TikZ with `pdflatex` and
poppler, each as a bash run confined like any program (its own scratch, no network, the run's
time and memory limits, the sandbox's filesystem layer), and reading back what it rendered.

DOT: `dot -Tjson` (the laid-out graph: every node's and edge's drawn text) and `-Tpng` at
72 dpi. `SERVER_NAME` is set and `GV_FILE_PATH` is not, so Graphviz loads no file at all
(`image=`, `shapefile=`, an HTML label's `<IMG>`): it says "file loading is disabled".

TikZ: the answer (a `tikzpicture`; a whole document's body is taken from between
`\\begin{document}` and `\\end{document}`) is `\\input` by a fixed wrapper that loads TikZ and
sizes the page to the picture. pdflatex runs in a subdirectory with `-no-shell-escape`,
`openin_any=p` and `openout_any=p` (kpathsea's paranoid mode: no absolute path, no `..`, no
dot file), so TeX reads TeX's own tree and its own directory only and writes nowhere else. The
launcher, outside that directory (pdflatex's own messages go there too), then records what TeX tried (`runsystem(` in the log: a
`\\write18`; kpathsea's "Not reading from"/"Not writing to": a refused path), the images the
PDF holds (`pdfimages -list`, and pdftex's log line for every included graphic) and extracts
the first page's words with their boxes (`pdftotext -bbox`), its vector paths (`pdftocairo
-svg`) and a grayscale raster 600 pixels on its long side (`pdftoppm`).

Each launcher is one bash function called on its last line, so bash has read all of it before
anything runs (bash reads a script as it goes).
"""

from __future__ import annotations

from dataclasses import dataclass

from execrl.sandbox.grading.artifacts import ArtifactSpec, ProgramRun, program_job, program_run
from execrl.sandbox.grading.job import Job
from execrl.sandbox.verifiers.base import VerifierSpecError, VerifyRequest

FORMATS = ("dot", "tikz")
IMAGE = ArtifactSpec("diagram.png", "image", 1 << 20)
LAYOUT = ArtifactSpec("layout.json", "json", 2 << 20)  # dot -Tjson
WORDS = ArtifactSpec("words.html", "text", 1 << 20)  # pdftotext -bbox
PATHS = ArtifactSpec("paths.svg", "file", 2 << 20)  # pdftocairo -svg
CHECKS = ArtifactSpec("checks.txt", "text", 4 << 10)  # what the launcher saw TeX try
COLLECT = {"dot": (IMAGE, LAYOUT), "tikz": (IMAGE, WORDS, PATHS, CHECKS)}

DOT_LAUNCHER = r"""
render() {
    rm -f layout.json diagram.png
    export SERVER_NAME=execrl-diagram
    unset GV_FILE_PATH
    if ! dot -Gdpi=72 -Tjson -o layout.json -Tpng -o diagram.png diagram.dot 2>errors.txt; then
        echo "dot failed:" >&2
        head -c 1500 errors.txt >&2
        exit 1
    fi
}
render
exit
"""

TIKZ_LAUNCHER = r"""
render() {
    rm -f diagram.png words.html paths.svg checks.txt
    cd tex || exit 2
    export openin_any=p openout_any=p HOME="$PWD" TEXMFVAR="$PWD/var" TEXMFCONFIG="$PWD/var"
    pdflatex -no-shell-escape -interaction=nonstopmode -halt-on-error diagram.tex \
        >../tex-output.txt 2>&1
    status=$?
    intact=0
    if head -c 14 diagram.log | grep -q '^This is pdfTeX' && ! LC_ALL=C grep -q -a -P '\x00' diagram.log; then
        intact=1
    fi
    {
        echo "escape $(grep -c 'runsystem(' diagram.log 2>/dev/null)"
        echo "refused $(grep -c -E 'Not (reading from|writing to)' ../tex-output.txt)"
        echo "included $(grep -c -E '^<[^>]+, id=[0-9]+, ' diagram.log 2>/dev/null)"
        echo "intact $intact"
    } >../checks.txt
    if [ "$status" -ne 0 ] || [ ! -s diagram.pdf ]; then
        echo "pdflatex failed:" >&2
        grep -A 3 -m 3 '^!' diagram.log >&2 || tail -c 1500 ../tex-output.txt >&2
        exit 1
    fi
    cd ..
    echo "raster $(pdfimages -f 1 -l 1 -list tex/diagram.pdf | tail -n +3 | wc -l)" >>checks.txt
    pdftotext -f 1 -l 1 -bbox tex/diagram.pdf words.html || exit 1
    pdftocairo -f 1 -l 1 -svg tex/diagram.pdf paths.svg || exit 1
    pdftoppm -f 1 -l 1 -scale-to 600 -gray -png -singlefile tex/diagram.pdf diagram || exit 1
}
render
exit
"""

TIKZ_WRAPPER = r"""\documentclass{article}
\usepackage{tikz}
\usetikzlibrary{arrows.meta,automata,calc,positioning,shapes.geometric}
\pdfhorigin=10pt
\pdfvorigin=10pt
\begin{document}
\setbox0=\hbox{\input{candidate.tex}\unskip}
\pdfpagewidth=\dimexpr\wd0+20pt\relax
\pdfpageheight=\dimexpr\ht0+\dp0+20pt\relax
\shipout\box0
\end{document}
"""


@dataclass(frozen=True, slots=True)
class TexChecks:
    """What the TikZ launcher saw TeX try, counted from its log and messages."""

    escapes: int  # \write18 attempts (pdftex's "runsystem(...)...disabled")
    refused: int  # paths kpathsea refused to open (absolute, "..", dot files)
    included: int  # graphics files pdftex included (\includegraphics, \pdfximage)
    rasters: int  # raster images on the first page of the PDF (pdfimages -list)
    # The log is pdftex's own, whole: TeX may \openout a file of its directory, the log among
    # them, to hide a line from the counts above; what pdftex writes after that leaves a hole
    # of NUL bytes or a log that no longer starts with its banner.
    log_intact: bool


def diagram_format(request: VerifyRequest) -> str:
    fmt = request.field("format", str)
    if fmt not in FORMATS:
        raise VerifierSpecError(
            f"task {request.task_id}: spec.format must be one of {', '.join(FORMATS)}, got {fmt!r}"
        )
    return fmt


def render_job(fmt: str, source: str, request: VerifyRequest) -> Job:
    """One sandboxed run that renders `source` (DOT or TikZ) and leaves what `COLLECT` names."""
    if fmt == "dot":
        launcher, files = DOT_LAUNCHER, (("diagram.dot", source.encode()),)
    else:
        files = (
            ("tex/diagram.tex", TIKZ_WRAPPER.encode()),
            ("tex/candidate.tex", tikz_body(source).encode()),
        )
        launcher = TIKZ_LAUNCHER
    return program_job(
        launcher,
        language="bash",
        files=files,
        collect=COLLECT[fmt],
        limits=request.limits,
        job_id=request.task_id,
    )


def read_render(fmt: str, result) -> ProgramRun:  # noqa: ANN001 - an ExecutionResult
    return program_run(result, COLLECT[fmt])


def tikz_body(source: str) -> str:
    """The part of a TikZ answer the wrapper inputs: a whole document's body, else all of it
    (a preamble's packages cannot load inside the document, and the wrapper loads TikZ)."""
    begin, end = r"\begin{document}", r"\end{document}"
    if begin in source:
        source = source.split(begin, 1)[1]
        source = source.split(end, 1)[0]
    return source.strip() + "\n"


def tex_checks(text: str) -> TexChecks:
    """checks.txt as written by the TikZ launcher; a missing count reads as one attempt, so a
    file the launcher did not finish never clears a program."""
    counts: dict[str, int] = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        counts[name] = int(value) if value.strip().isdigit() else 1
    return TexChecks(
        escapes=counts.get("escape", 1),
        refused=counts.get("refused", 1),
        included=counts.get("included", 1),
        rasters=counts.get("raster", 1),
        log_intact=counts.get("intact", 0) == 1,
    )
