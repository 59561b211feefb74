"""`chart`: a matplotlib program rendered headless in the sandbox, scored against the task's
reference chart by the data read from the figure and by image similarity.

Both programs run through the same runner, in the sandbox, as a separate interpreter with the
installed packages (the in-process harness admits only the standard library): it executes the
program with the Agg backend and a fixed figure size, then itself renders the current figure to
`chart.png` and reads from its first axes what was plotted: each line, bar series and scatter
(its kind, x and y values, label), the title, axis labels, legend entries and, for bar charts,
the category names, printed on one line sealed as the harness seals its channel
(`protocol.seal`, read back with `protocol.ChannelReader`) under a per-program key
(`_key_of`). The reference is rendered once per process and kept in the parent's memory only,
so no path the program can guess holds it.

The key never enters the program's namespace: a thread of the runner's own reads it raw from
stdin (then stdin is /dev/null, and the unlinked file that held it is gone), keeps it in its
frame alone, and after the program has run in the main thread, renders and reads the figure
and seals the line. execrl's audit hook (the harness's, `audit_hook`, installed before the
program runs) denies what reaches another thread's frames or the process's memory (frames,
tracebacks, gc's object lists, ctypes, /proc/self/mem, new processes); a signal handler, handed
the frame it interrupts, runs in the main thread, whose frames hold no key. Residual risk: what
the figure holds is what matplotlib's objects say, and the program can patch matplotlib, so it
can make the runner describe data it never drew (as it could draw that data; it still learns
nothing of the target beyond its prompt); and numpy, which the runner needs, can read raw
memory through an array interface with a hand-made address, which no audit event marks.

Scores (the parent compares; the runner decides nothing):
- `chart_type`: the kinds of the plotted series, as multisets, are the reference's (1 or 0);
- `series`: reference series matched by a candidate series of the same kind whose values equal
  it within 1e-6 relative (a non-finite value matches only the same non-finite value), over
  max(reference series, candidate series);
- `labels`: the fraction of text fields (title, x and y labels, legend, categories) equal after
  trimming and case folding;
- `image`: the mean structural similarity, SSIM (Wang et al. 2004, IEEE TIP 13(4)), of the two
  grayscale renders over 7x7 uniform windows, the candidate resized to the reference's size;
  1.0 for identical images.
Score = 0.25 (chart_type + series + labels) + 0.25 image. PASSED when the type, every series
and every label match; a chart that only looks right never passes. The renders are kept as
artifacts (`chart.png`, `reference.png`) for the report.

spec: `reference` (the reference program; its render is the target).
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import secrets
import threading
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from execrl.sandbox.confine.hidden_paths import sandbox_interpreter
from execrl.sandbox.grading.artifacts import Artifact, ArtifactSpec, program_job, program_run
from execrl.sandbox.grading.compare import same_number
from execrl.sandbox.grading.job import Job
from execrl.sandbox.grading.verdict import ExecutionResult, Verdict
from execrl.sandbox.run import audit_hook, frameless, protocol
from execrl.sandbox.verifiers.base import (
    Verification,
    VerifierSpecError,
    VerifyRequest,
    failed,
    strip_fence,
)

MARK = "@execrl-chart "
_SECRET = secrets.token_bytes(16)  # per process: the keys of the runs' result lines
IMAGE = ArtifactSpec("chart.png", "image", 1 << 20)
WEIGHTS = {"chart_type": 0.25, "series": 0.25, "labels": 0.25, "image": 0.25}
RTOL = 1e-6
MAX_PIXELS = 4_000_000  # a render larger than this is not decoded (decompression bombs)

RUNNER = r"""
import os, sys
os.environ["MPLBACKEND"] = "Agg"
os.environ["MPLCONFIGDIR"] = os.path.abspath(".mpl")
import json, threading, traceback, warnings
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib import _api
from matplotlib.container import BarContainer
from matplotlib.collections import PathCollection

MARK = "__MARK__"


def number(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return str(v)


def describe(fig):
    fig.canvas.draw()
    if not fig.axes:
        return {"series": [], "title": "", "xlabel": "", "ylabel": "", "legend": [], "categories": []}
    ax = fig.axes[0]
    series = []
    for line in ax.get_lines():
        xs, ys = line.get_xdata(orig=True), line.get_ydata(orig=True)
        series.append({"kind": "line", "label": line.get_label(),
                       "x": [number(v) for v in xs], "y": [number(v) for v in ys]})
    for c in ax.containers:
        if isinstance(c, BarContainer):
            xs = [p.get_x() + p.get_width() / 2 for p in c.patches]
            ys = [p.get_height() for p in c.patches]
            series.append({"kind": "bar", "label": c.get_label(),
                           "x": [number(v) for v in xs], "y": [number(v) for v in ys]})
    for coll in ax.collections:
        if isinstance(coll, PathCollection):
            pts = coll.get_offsets()
            series.append({"kind": "scatter", "label": coll.get_label(),
                           "x": [number(p[0]) for p in pts], "y": [number(p[1]) for p in pts]})
    legend = ax.get_legend()
    bars = any(s["kind"] == "bar" for s in series)
    return {
        "series": series,
        "title": ax.get_title(),
        "xlabel": ax.get_xlabel(),
        "ylabel": ax.get_ylabel(),
        "legend": [t.get_text() for t in legend.get_texts()] if legend else [],
        "categories": [t.get_text() for t in ax.get_xticklabels()] if bars else [],
    }


def private(path):
    # A module of execrl's (its source shipped beside this runner) in a namespace only the
    # sealing thread's locals refer to.
    namespace = {"__name__": "execrl_" + path[:-3]}
    exec(compile(open(path, encoding="utf-8").read(), path, "exec"), namespace)
    return namespace


def warn_external(message, category=None):
    # matplotlib's own walks the stack with sys._getframe, which the audit hook denies.
    warnings.warn(message, category, stacklevel=2)


def sealer(ready, done, outcome):
    # The channel's key lives in this thread's frame alone. Its frames are out of the program's
    # reach: the audit hook (execrl's `audit_hook`) denies sys._getframe, sys._current_frames,
    # tracebacks' and generators' frames, gc's object lists, ctypes and /proc/self/mem, and a
    # signal handler, which is handed the frame it interrupts, runs in the main thread only.
    # Everything after the program runs here too, so no frame of the main thread (where the
    # program runs) ever holds what is sealed.
    key = bytes.fromhex(os.read(0, 64).decode().strip())
    seal, write, dumps, exit_ = private("protocol.py")["seal"], os.write, json.dumps, os._exit
    ready.set()
    done.wait()
    try:
        if outcome:
            out = {"status": "error", "error": str(outcome[0])}
        elif not plt.get_fignums():
            out = {"status": "error", "error": "no figure is open at the end"}
        else:
            fig = plt.gcf()
            fig.set_size_inches(4, 3)
            fig.savefig("chart.png", dpi=50)
            out = {"status": "ok", "figure": describe(fig)}
        body = dumps(out).encode()
    except BaseException as exc:
        body = dumps({"status": "error", "error": f"reading the figure: {type(exc).__name__}"}).encode()
    try:
        sys.stdout.flush()
    except BaseException:
        pass
    try:
        write(1, b"\n" + MARK.encode() + seal(key, 0, body))
    finally:  # a closed stdout ends the run now, without its line, not at the time limit
        exit_(0)


def main():
    ready, done, outcome = threading.Event(), threading.Event(), []
    threading.Thread(target=sealer, args=(ready, done, outcome), daemon=True).start()
    ready.wait()
    # The sealing thread has read the key from stdin (raw: no buffer keeps it); stdin is now
    # /dev/null, so the unlinked file that held it is gone.
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdin = open(os.devnull)
    _api.warn_external = warn_external
    plt.rcParams.update({"figure.figsize": (4, 3), "figure.dpi": 50, "savefig.dpi": 50})
    source = open("chart.py", encoding="utf-8").read()
    # Modules imported from here compile from source, as in the harness: cached bytecode is
    # read through marshal.loads, which the hook denies.
    sys.pycache_prefix = "/proc/execrl-no-bytecode"
    state = {"privileged": True, "dirty": False, "extra_globals": set(),
             "p": {"get_ident": threading.get_ident, "protected_globals": {id(globals())}}}
    private("audit_hook.py")["install"](state, lambda **_: None, False)
    private("frameless.py")["install"](traceback)  # the hook refuses tracebacks' frames
    state["privileged"] = False
    try:
        exec(compile(source, "chart.py", "exec"), {"__name__": "__main__"})
    except SystemExit as exc:
        if exc.code not in (None, 0):
            outcome.append(f"SystemExit: {exc.code}")
    except BaseException as exc:
        outcome.append(f"{type(exc).__name__}: {exc}")
    done.set()
    threading.Event().wait()  # the sealing thread ends the process


main()
""".replace("__MARK__", MARK)


class ChartVerifier:
    name = "chart"
    components = ("chart_type", "series", "labels", "image")

    def __init__(self) -> None:
        self._references: dict[str, tuple[dict[str, Any], bytes]] = {}
        self._lock = threading.Lock()

    def jobs(self, request: VerifyRequest) -> Sequence[Job]:
        reference = request.field("reference", str)
        runs = [_job(strip_fence(request.program), request)]
        with self._lock:
            known = _key(reference) in self._references
        return runs if known else [*runs, _job(reference, request)]

    def verify(self, request: VerifyRequest, runs: Sequence[ExecutionResult]) -> Verification:
        reference = request.spec["reference"]
        key = _key(reference)
        if len(runs) == 2:
            ref = _read(runs[1], _key_of(reference, request))
            if isinstance(ref, str):
                raise VerifierSpecError(
                    f"task {request.task_id}: the reference chart failed: {ref}"
                )
            with self._lock:
                self._references[key] = ref
        with self._lock:
            want, want_png = self._references[key]
        artifacts = [Artifact("reference.png", "image", want_png)]
        got = _read(runs[0], _key_of(strip_fence(request.program), request))
        if isinstance(got, str):
            return failed(Verdict.RUNTIME_ERROR, got)
        figure, png = got
        artifacts.insert(0, Artifact("chart.png", "image", png))
        components = {
            "chart_type": float(_kinds(figure) == _kinds(want)),
            "series": _series_score(figure["series"], want["series"]),
            "labels": _labels_score(figure, want),
            "image": image_similarity(png, want_png),
        }
        score = sum(WEIGHTS[k] * v for k, v in components.items())
        passed = all(components[k] == 1.0 for k in ("chart_type", "series", "labels"))
        feedback = "the chart shows the asked data and labels" if passed else _feedback(components)
        verdict = Verdict.PASSED if passed else Verdict.WRONG_ANSWER
        return Verification(min(1.0, score), components, verdict, feedback, tuple(artifacts))


def _job(program: str, request: VerifyRequest) -> Job:
    # A separate interpreter (bash execs it, confined like any run) with site-packages: -I
    # ignores the environment and the user's site directory.
    launcher = f"OPENBLAS_NUM_THREADS=1 exec {sandbox_interpreter()} -I runner.py\n"
    files = (
        ("runner.py", RUNNER.encode()),
        ("chart.py", program.encode()),
        *_shipped_modules(),
        *_font_cache(),
    )
    return program_job(
        launcher,
        language="bash",
        stdin=_key_of(program, request).hex() + "\n",
        files=files,
        collect=(IMAGE,),
        limits=request.limits,
        job_id=request.task_id,
    )


@functools.cache
def _shipped_modules() -> tuple[tuple[str, bytes], ...]:
    """The runner seals its line with execrl's own `protocol.seal`, guards its key with
    execrl's own audit hook, the harness's, and formats tracebacks without frames as runs do
    (`frameless`) (one home for each): their sources go with it, since
    the runner's interpreter runs isolated (-I) and need not see execrl."""
    return tuple(
        (f"{module.__name__.rsplit('.', 1)[1]}.py", Path(module.__file__ or "").read_bytes())
        for module in (protocol, audit_hook, frameless)
    )


@functools.cache
def _font_cache() -> tuple[tuple[str, bytes], ...]:
    """matplotlib's font list, built once here: without it every run scans the system's fonts
    (a third of a run's time). It holds font paths and metrics, nothing of a task."""
    try:
        from matplotlib import font_manager
    except ImportError:
        return ()
    name = f".mpl/fontlist-v{font_manager.FontManager.__version__}.json"
    text = json.dumps(font_manager.fontManager, cls=font_manager._JSONEncoder)
    return ((name, text.encode()),)


def _key(reference: str) -> str:
    return hashlib.sha256(reference.encode()).hexdigest()


def _key_of(program: str, request: VerifyRequest) -> bytes:
    """The key that seals a run's result line: derived from the program and a per-process
    secret."""
    data = f"{request.task_id}\0{program}".encode()
    return hashlib.blake2b(data, key=_SECRET, digest_size=16).digest()


def _read(result: ExecutionResult, key: bytes) -> tuple[dict[str, Any], bytes] | str:
    """(figure description, PNG) of a run, or why there is none."""
    run = program_run(result, (IMAGE,))
    if not run.ran:
        return f"the program did not run: {run.message}"
    lines = [ln[len(MARK) :] for ln in run.stdout.splitlines() if ln.startswith(MARK)]
    reader = protocol.ChannelReader(key)
    reader.feed("".join(f"{ln}\n" for ln in lines).encode(errors="replace"), final=True)
    if reader.broken or len(reader.events) > 1:
        return "the program printed result lines of its own"
    if not reader.events:
        return "the program ended before its figure was read"
    out = reader.events[0]
    if out.get("status") != "ok":
        return f"the program failed: {out.get('error')}"
    image = run.artifacts.get(IMAGE.path)
    if image is None:
        return "no chart was rendered"
    return out["figure"], image.data


def _kinds(figure: dict[str, Any]) -> Counter[str]:
    return Counter(s["kind"] for s in figure["series"])


def _values_equal(a: list[Any], b: list[Any]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if isinstance(x, float) and isinstance(y, float):
            if not same_number(x, y, RTOL * max(1.0, abs(x), abs(y))):
                return False
        elif x != y:
            return False
    return True


def _series_score(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> float:
    if not want and not got:
        return 1.0
    unused = list(got)
    matched = 0
    for w in want:
        hit = next(
            (
                g
                for g in unused
                if g["kind"] == w["kind"]
                and _values_equal(g["y"], w["y"])
                and _values_equal(g["x"], w["x"])
            ),
            None,
        )
        if hit is not None:
            unused.remove(hit)
            matched += 1
    return matched / max(len(want), len(got))


def _norm(text: Any) -> str:
    return " ".join(str(text).split()).casefold()


def _labels_score(got: dict[str, Any], want: dict[str, Any]) -> float:
    fields = [
        (_norm(got[k]), _norm(want[k])) for k in ("title", "xlabel", "ylabel") if got[k] or want[k]
    ]
    for key in ("legend", "categories"):
        if got[key] or want[key]:
            fields.append(([_norm(t) for t in got[key]], [_norm(t) for t in want[key]]))
    if not fields:
        return 1.0
    return sum(a == b for a, b in fields) / len(fields)


def image_similarity(png: bytes, reference_png: bytes) -> float:
    """Mean SSIM of two PNGs in grayscale, the first resized to the second's size; 0.0 when
    either cannot be decoded."""
    import numpy as np
    from PIL import Image

    try:
        images = []
        for data in (png, reference_png):
            image = Image.open(io.BytesIO(data))
            if image.width * image.height > MAX_PIXELS:
                return 0.0
            images.append(image.convert("L"))
    except (OSError, ValueError, Image.DecompressionBombError):
        return 0.0
    got, want = images
    if got.size != want.size:
        got = got.resize(want.size)
    x = np.asarray(got, dtype=np.float64)
    y = np.asarray(want, dtype=np.float64)
    return float(max(0.0, min(1.0, ssim(x, y))))


def ssim(x: Any, y: Any, window: int = 7) -> float:
    """Mean SSIM (Wang et al. 2004) with a uniform window; x, y: (H, W) arrays in [0, 255]."""
    import numpy as np

    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    if x.shape[0] < window or x.shape[1] < window:
        return float(np.array_equal(x, y))

    def mean(a: Any) -> Any:  # (H, W) -> (H - w + 1, W - w + 1) window means, by integral image
        s = np.pad(a, ((1, 0), (1, 0))).cumsum(0).cumsum(1)
        w = window
        return (s[w:, w:] - s[:-w, w:] - s[w:, :-w] + s[:-w, :-w]) / (w * w)

    mx, my = mean(x), mean(y)
    vx = mean(x * x) - mx * mx
    vy = mean(y * y) - my * my
    cxy = mean(x * y) - mx * my
    s = ((2 * mx * my + c1) * (2 * cxy + c2)) / ((mx * mx + my * my + c1) * (vx + vy + c2))
    return float(s.mean())


def _feedback(components: dict[str, float]) -> str:
    wrong = [
        {"chart_type": "the kind of chart", "series": "the plotted data", "labels": "the labels"}[k]
        for k in ("chart_type", "series", "labels")
        if components[k] < 1.0
    ]
    return "the chart differs from the one asked for in " + ", ".join(wrong)
