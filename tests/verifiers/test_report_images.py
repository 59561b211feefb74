"""The images a verifier keeps (the chart verifier's render and its reference chart) are written
into the run directory and shown in the run report beside the example completion."""

from __future__ import annotations

import io
import json
from types import SimpleNamespace

from execrl.report.build import build_report
from execrl.report.examples import ExampleLog, pick, read
from execrl.sandbox.grading.artifacts import Artifact
from execrl.sandbox.grading.verdict import ExecutionResult, Verdict
from execrl.sandbox.verifiers import Verification


def _png(shade: int) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("L", (8, 6), shade).save(out, format="PNG")
    return out.getvalue()


def _scored(artifacts: tuple[Artifact, ...], score: float) -> SimpleNamespace:
    """What `examples.pick` reads of an `rl.rollout.scored.Scored`: a completion graded by a
    verifier."""
    verification = Verification(score, {"image": score}, Verdict.WRONG_ANSWER, "", artifacts)
    result = ExecutionResult(Verdict.WRONG_ANSWER, extra={"verification": verification})
    return SimpleNamespace(
        score=score,
        task_index=0,
        verdict="WRONG_ANSWER",
        passed=False,
        reward=SimpleNamespace(masked=False, reason=""),
        completion=SimpleNamespace(n_tokens=3, truncated=False, text="plt.plot([1])"),
        sample=SimpleNamespace(result=result),
    )


def _run_dir(tmp_path, groups):
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 0, "reward_mean": 0.5}) + "\n")
    task = SimpleNamespace(id="chart/train/1/0", prompt="Draw a bar chart.")
    ExampleLog(tmp_path / "examples.jsonl").write(pick(0, groups, [task], 2, tmp_path))
    return build_report(tmp_path).html.read_text()


def test_the_report_shows_the_chart_and_its_reference(tmp_path):
    chart, reference = _png(40), _png(200)
    artifacts = (
        Artifact("chart.png", "image", chart),
        Artifact("reference.png", "image", reference),
    )
    page = _run_dir(tmp_path, [[_scored(artifacts, 0.6), _scored(artifacts[1:], 0.2)]])
    (best, *_), files = read(tmp_path / "examples.jsonl"), sorted(tmp_path.glob("artifacts/*"))
    # Two distinct images, two files: the reference shown with both examples is written once.
    assert [f.read_bytes() for f in files] in ([chart, reference], [reference, chart])
    assert len(best.images) == 2 and best.images[0].endswith("-chart.png")
    for path in best.images:
        assert (tmp_path / path).is_file()
        assert f'<img src="{path}"' in page
    assert page.count('<img src="artifacts/') == 3  # chart + reference, then the reference


def test_a_file_a_program_wrote_that_is_not_a_png_never_reaches_the_report(tmp_path):
    """A run's artifacts are bytes the program chose; the report embeds them as images, so only
    a PNG may be written there (an SVG named chart.png carries a script)."""
    svg = b'<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>'
    artifacts = (Artifact("chart.png", "image", svg), Artifact("reference.png", "image", _png(9)))
    page = _run_dir(tmp_path, [[_scored(artifacts, 0.5)]])
    files = list(tmp_path.glob("artifacts/*"))
    assert [f.read_bytes() for f in files] == [_png(9)]
    assert "-chart.png" not in page and "-reference.png" in page


def test_an_image_path_not_written_by_the_report_is_not_shown(tmp_path):
    """examples.jsonl is a file in the run directory: a path in it that `keep_images` would not
    have written (outside artifacts/, or a script URL) is left out of the page."""
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 0}) + "\n")
    record = {
        "step": 0, "task": "t", "score": 1.0, "verdict": "PASSED", "passed": True,
        "masked": False, "n_tokens": 1, "truncated": False, "prompt": "p", "completion": "c",
        "images": ["javascript:alert(1)", "../secret.png", "artifacts/0123456789abcdef-c.png"],
    }  # fmt: skip
    (tmp_path / "examples.jsonl").write_text(json.dumps(record) + "\n")
    page = build_report(tmp_path).html.read_text()
    assert "javascript:" not in page and "secret" not in page
    assert '<img src="artifacts/0123456789abcdef-c.png"' in page
