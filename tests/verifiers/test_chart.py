"""The chart verifier: figure data and image similarity, against a reference kept in memory."""

from __future__ import annotations

import math

import pytest

from execrl.sandbox import Verdict
from execrl.sandbox.verifiers.chart import ssim
from execrl.tasks.schema import VerifierTests
from verifiers.verifier_helpers import verify

REFERENCE = (
    "import matplotlib.pyplot as plt\n"
    "plt.bar(['a', 'b', 'c'], [3, 1, 2])\nplt.title('Sales')\nplt.xlabel('region')\n"
)
CHART = VerifierTests("chart", {"reference": REFERENCE})


def test_ssim_of_equal_images_is_one_and_of_inverted_ones_low():
    import numpy as np

    x = np.tile(np.arange(16, dtype=np.float64) * 16, (16, 1))
    assert ssim(x, x) == pytest.approx(1.0)
    assert ssim(x, 255 - x) < 0.1


@pytest.mark.slow  # about 10 s: four matplotlib runs
def test_data_decides_the_verdict_and_the_image_the_rest_of_the_score(sandbox):
    restyled = (
        "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\n"
        "ax.bar(['a', 'b', 'c'], [3, 1, 2], color='tab:red')\n"
        "ax.set_title(' sales')\nax.set_xlabel('Region')\n"
    )
    as_line = REFERENCE.replace("plt.bar", "plt.plot")
    (ref, vr), (styled, vs), (line, vl) = verify(
        sandbox, CHART, REFERENCE, restyled, as_line, wall_s=30
    )
    assert ref.passed and vr.score == 1.0 and vr.components["image"] == 1.0
    assert {a.path for a in vr.artifacts} == {"chart.png", "reference.png"}
    assert styled.passed and 0.9 < vs.score < 1.0  # another colour: the image differs a little
    assert line.verdict is Verdict.WRONG_ANSWER
    assert vl.components["chart_type"] == 0.0 and vl.components["series"] == 0.0
    assert vl.score < 0.75


def test_a_chart_program_cannot_pass_by_writing_the_expected_image(sandbox):
    """The reference render lives in the parent's memory only; and even the exact reference
    PNG, written where the chart is read and over every save, fails: the figure's data is
    read from the figure, not from the image."""
    ((_, first),) = verify(sandbox, CHART, REFERENCE, wall_s=30)
    png = next(a.data for a in first.artifacts if a.path == "reference.png")
    guessed = (
        "import os, shutil\n"
        "for p in ['/tmp/reference.png', '../reference.png', 'reference.png',\n"
        "          os.path.expanduser('~/.cache/execrl/reference.png'), '/work/main/reference.png']:\n"
        "    try:\n        shutil.copy(p, 'chart.png')\n    except OSError:\n        pass\n"
        "import matplotlib.pyplot as plt\nplt.figure()\n"
    )
    stolen = (
        "import matplotlib.figure\nPNG = " + repr(png) + "\n"
        "def save(self, *a, **k):\n    open('chart.png', 'wb').write(PNG)\n"
        "matplotlib.figure.Figure.savefig = save\n"
        "import matplotlib.pyplot as plt\nplt.figure()\nplt.title('Sales')\n"
    )
    (r1, v1), (r2, v2) = verify(sandbox, CHART, guessed, stolen, wall_s=30)
    assert not r1.passed and v1.score < 0.5, v1
    assert not r2.passed and v2.components["series"] == 0.0, v2
    assert v2.components["image"] == 1.0 and v2.score < 1.0  # it did copy the image


def test_a_chart_program_cannot_forge_the_figure_description(sandbox):
    """The runner's result line carries a key given on stdin (in no file the program can read):
    a program that prints the description the prompt implies, writes any image and exits before
    the runner reads its figure gets no credit for data it never plotted."""
    bars = {"kind": "bar", "label": "", "x": [0.0, 1.0, 2.0], "y": [3.0, 1.0, 2.0]}
    figure = {"series": [bars], "title": "Sales", "xlabel": "region", "ylabel": "",
              "legend": [], "categories": ["a", "b", "c"]}  # fmt: skip
    forged = (
        "import json, os, sys\n"
        f"line = json.dumps({{'status': 'ok', 'figure': {figure!r}}})\n"
        "print('@execrl-chart ' + line)  # the marker, read from runner.py; not the key\n"
        "open('chart.png', 'wb').write(b'not a png')\n"
        "sys.stdout.flush()\n"
        "os._exit(0)\n"
    )
    ((r, v),) = verify(sandbox, CHART, forged, wall_s=30)
    assert not r.passed and v.score == 0.0, v
    assert "result lines of its own" in v.feedback


def test_non_finite_series_never_match_a_finite_reference(sandbox):
    """A pair fails only when `abs(x - y) > tol`, which is False for NaN: an all-NaN series of
    the reference's length matched any reference. A non-finite value matches only the same
    non-finite value, in every verifier's numeric comparison."""
    labels = "plt.title('Sales')\nplt.xlabel('region')\n"
    nan_bars = "import matplotlib.pyplot as plt\nplt.bar(['a', 'b', 'c'], [float('nan')] * 3)\n"
    inf_bars = "import matplotlib.pyplot as plt\nplt.bar(['a', 'b', 'c'], [float('inf')] * 3)\n"
    (r1, v1), (r2, v2) = verify(sandbox, CHART, nan_bars + labels, inf_bars + labels, wall_s=30)
    assert not r1.passed and v1.components["series"] == 0.0, v1
    assert not r2.passed and v2.components["series"] == 0.0, v2
    from execrl.sandbox.grading.compare import same_number

    assert not same_number(math.nan, 1.0, 1e-6) and not same_number(1.0, math.nan, 1e-6)
    assert not same_number(math.inf, 1e308, 1e300) and not same_number(-math.inf, math.inf, 1.0)
    assert same_number(math.nan, math.nan, 0.0) and same_number(math.inf, math.inf, 0.0)
    assert same_number(1.0, 1.0 + 1e-9, 1e-6) and not same_number(1.0, 1.1, 1e-6)


FORGE = """
import hashlib, json, os, sys
BODY = json.dumps({"status": "ok", "figure": %r}).encode()
open("chart.png", "wb").write(b"not a png")  # an image is looked for; any will do

def forge(key):
    # A line sealed as the runner seals its own (protocol.seal), with the key found.
    rest = b"0 " + BODY
    tag = hashlib.blake2b(rest, key=key, digest_size=16).hexdigest().encode()
    sys.stdout.flush()
    os.write(1, b"\\n@execrl-chart " + tag + rest + b"\\n")
    os._exit(0)

def keys_in(values):
    for v in values:
        if isinstance(v, bytes) and len(v) == 16:
            yield v
        elif isinstance(v, str) and len(v) == 32:
            try:
                yield bytes.fromhex(v)
            except ValueError:
                pass
"""
ROUTES = {
    # The runner kept its key in a module global: print a line with it, draw nothing.
    "module global": "import __main__\nfor name, v in vars(__main__).items():\n"
    "    if isinstance(v, str) and v.startswith('@execrl-chart ') and len(v) > 20:\n"
    "        print(v + BODY.decode()); sys.stdout.flush(); os._exit(0)\n"
    "    for k in keys_in([v]):\n        forge(k)\n",
    "stdin again": "os.lseek(0, 0, os.SEEK_SET)\nfor k in keys_in([os.read(0, 64).strip()]):\n"
    "    forge(k)\nfor k in keys_in([open('/proc/self/fd/0').read().strip()]):\n    forge(k)\n",
    "a signal handler's frames": "import signal\nfound = []\n"
    "def handler(signum, frame):\n    while frame is not None:\n"
    "        found.extend(keys_in(frame.f_locals.values()))\n        frame = frame.f_back\n"
    "signal.signal(signal.SIGUSR1, handler)\nos.kill(os.getpid(), signal.SIGUSR1)\n"
    "for k in found:\n    forge(k)\n",
    "other threads": "import threading\nfor t in threading.enumerate():\n"
    "    parts = list(getattr(t, '_args', ())) + [getattr(t, '_target', None)]\n"
    "    cells = getattr(parts[-1], '__closure__', None) or ()\n"
    "    for k in keys_in(parts + [c.cell_contents for c in cells]):\n        forge(k)\n",
    "the garbage collector": "import gc\nfor k in keys_in(gc.get_objects()):\n    forge(k)\n",
    "the process's memory": "import sys\nmem = open('/proc/self/mem', 'rb')\n",
}


@pytest.mark.parametrize("route", list(ROUTES))
def test_a_chart_program_cannot_read_or_write_the_result_channel(sandbox, route):
    """The runner's result line was keyed with a module global the program could read: a
    program that drew nothing printed a passing description. The line is sealed now as the
    harness seals its own (`protocol.seal`), with a key read raw from stdin by a thread of its
    own, which also reads the figure; the program, in the main thread, gets no frame of that
    thread (execrl's audit hook). Each route to the key fails, and a program that draws nothing
    scores 0."""
    bars = {"kind": "bar", "label": "", "x": [0.0, 1.0, 2.0], "y": [3.0, 1.0, 2.0]}
    figure = {"series": [bars], "title": "Sales", "xlabel": "region", "ylabel": "",
              "legend": [], "categories": ["a", "b", "c"]}  # fmt: skip
    program = FORGE % (figure,) + ROUTES[route]
    ((r, v),) = verify(sandbox, CHART, program, wall_s=30)
    assert not r.passed and v.score == 0.0, (route, v.feedback)


def test_a_chart_program_that_closes_stdout_fails_at_once(sandbox):
    program = "import os\nimport matplotlib.pyplot as plt\nplt.bar(['a'], [1])\nos.close(1)\n"
    ((r, v),) = verify(sandbox, CHART, program, wall_s=30)
    assert not r.passed and "ended before its figure was read" in v.feedback, v.feedback
    assert r.wall_s < 20, r.wall_s


@pytest.mark.slow  # about 5 s: two matplotlib runs
def test_a_chart_runs_when_the_interpreter_is_reached_through_a_hidden_link(
    sandbox, tmp_path, monkeypatch
):
    # A working tree whose .venv links to a venv elsewhere: the tree is hidden from a run, so
    # the link is not there to follow (it was exit status 127, a SANDBOX_ERROR)
    import os
    import sys

    link = tmp_path / "venv-bin"
    link.symlink_to(os.path.realpath(os.path.dirname(sys.executable)))
    monkeypatch.setattr(sys, "executable", str(link / os.path.basename(sys.executable)))
    ((ref, verification),) = verify(sandbox, CHART, REFERENCE, wall_s=30)
    assert ref.passed and verification.score == 1.0


@pytest.mark.slow  # about 5 s: two matplotlib runs
def test_a_right_chart_that_logs_a_traceback_passes(sandbox):
    """The runner installs the harness's audit hook, which refuses only what hands out a frame,
    and formats tracebacks without frames as runs do (`frameless`): a program that uses a
    dataclass and logs a handled error with its traceback draws its chart and passes."""
    program = (
        "import logging, traceback\nfrom dataclasses import dataclass\n"
        "import matplotlib.pyplot as plt\n\n@dataclass\nclass Sale:\n"
        "    region: str\n    amount: int = 0\n\n"
        "sales = [Sale('a', 3), Sale('b', 1), Sale('c', 2)]\ntry:\n    int('n/a')\n"
        "except ValueError:\n    traceback.print_exc()\n    logging.exception('bad amount')\n"
        "plt.bar([s.region for s in sales], [s.amount for s in sales])\n"
        "plt.title('Sales')\nplt.xlabel('region')\n"
    )
    ((r, v),) = verify(sandbox, CHART, program, wall_s=30)
    assert r.passed and v.score == 1.0, v.feedback
