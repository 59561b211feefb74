"""The `web` verifier in a real headless Chromium, in the sandbox: the reference scores the
maximum, each hack scores below it (one test per hack, all run in one batch), a page cannot
read what grades it, and no browser process outlives its run.

One browser at a time (a sandbox of one worker). Every test here is marked slow, to keep the
default tier under 10 minutes on 2 cores: the batch (about six browser runs, 22 s) runs in CI by
name (`.ci/run`, the tests marked BROWSER_BATCH), the rest only with `-m slow`. Without Chromium or Playwright these tests skip with the reason, but
fail in CI (EXECRL_REQUIRE_TOOLS=1, set by .ci/run)."""

from __future__ import annotations

import base64
import os
import random
import time

import pytest

from execrl.cli import main
from execrl.sandbox import Job, Limits, Sandbox, Verdict
from execrl.sandbox.grading.artifacts import program_run
from execrl.sandbox.verifiers import Verification, VerifyRequest, verification_of
from execrl.sandbox.verifiers.chart import image_similarity
from execrl.sandbox.verifiers.web import WebVerifier, missing_browser
from execrl.sandbox.verifiers.web_seen import RESULT, read_seen
from execrl.tasks.schema import VerifierTests
from execrl.tasks.suites.web import spec_of
from execrl.tasks.suites.web_answer import format_answer
from execrl.tasks.suites.web_pages import LEVEL_1, LEVEL_2, counter
from execrl.tasks.suites.web_sites import LEVEL_3
from execrl.tasks.suites.web_wrong import WRONG

# the batch of one browser run per answer kind: slow here, run in CI by name (.ci/run)
BROWSER_BATCH = pytest.mark.slow


MARK = b"--execrl-web-run"  # the driver passes it to Chromium: how leftovers are found


def needs_browser() -> None:
    missing = missing_browser()
    if missing:
        if os.environ.get("EXECRL_REQUIRE_TOOLS") == "1":
            pytest.fail(missing)
        pytest.skip(missing)


def browsers_running() -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if MARK in f.read():
                        found.append(int(entry))
            except OSError:
                continue
    return found


def _no_browser_left() -> None:
    deadline = time.monotonic() + 5  # the worker reaps its run's processes as the run ends
    while browsers_running() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert browsers_running() == []


@pytest.fixture(scope="module")
def web_sandbox():
    needs_browser()
    with Sandbox(workers=1) as sb:
        yield sb


COUNTER = counter(random.Random(7))
TESTS = VerifierTests("web", spec_of(COUNTER))
REFERENCE = format_answer(COUNTER.files)
# Synchronous requests, so that what the page read is in the DOM once it has loaded.
SNOOP = """<!DOCTYPE html><html><body><p id="leak">none</p><script>
const got = [];
for (const url of ["file:///etc/passwd", "/../plan.json", "../plan.json", "/driver.py",
                   "/%2e%2e/plan.json", "http://example.com/"]) {
  try {
    const xhr = new XMLHttpRequest();
    xhr.open("GET", url, false);
    xhr.send();
    if (xhr.status === 200) got.push(xhr.responseText);
  } catch (e) {}
}
if (got.length) document.getElementById("leak").textContent = got.join("|");
</script></body></html>"""
SNOOP_TESTS = VerifierTests(
    "web",
    {
        "reference": SNOOP,
        "pages": ["index.html"],
        "scenarios": [{"page": "index.html", "expect": [{"selector": "#leak", "text": "none"}]}],
    },
)


def _hack(kind: str) -> str:
    return format_answer(WRONG[kind](COUNTER.files, COUNTER.links, (400, 300)))


@pytest.fixture(scope="module")
def batch(web_sandbox):
    """The reference, each hack and the snoop page, in one batch; then no browser is left."""
    kinds = ["js_error", "broken_link", "ignores_clicks", "picture"]
    jobs = [Job(p, TESTS, limits=Limits(wall_s=3), id=f"web/{i}") for i, p in
            enumerate([REFERENCE, *(_hack(k) for k in kinds)])]  # fmt: skip
    request = VerifyRequest("web/snoop", SNOOP, SNOOP_TESTS, Limits())
    (snoop_job,) = WebVerifier().jobs(request)  # the snoop is its own reference: one run
    results = web_sandbox.run_many([*jobs, snoop_job])
    verified = {}
    for kind, r in zip(["reference", *kinds], results[:-1], strict=True):
        v = verification_of(r)
        assert isinstance(v, Verification), (kind, r.verdict, r.message)
        verified[kind] = (r, v)
    return verified, results[-1]


@BROWSER_BATCH
def test_the_reference_scores_the_maximum(batch):
    result, v = batch[0]["reference"]
    assert result.passed and v.score == 1.0, v.feedback
    assert v.components == {"structure": 1.0, "function": 1.0, "appearance": 1.0}
    assert {a.path for a in v.artifacts} == {"page-0.png", "reference-0.png"}
    assert all(a.data.startswith(b"\x89PNG") for a in v.artifacts)


@BROWSER_BATCH
def test_a_page_with_an_uncaught_error_scores_below(batch):
    result, v = batch[0]["js_error"]
    assert not result.passed and v.components["function"] == 0.5  # every check holds, but
    assert v.score == pytest.approx(0.55) and "undefinedHelper" in v.feedback


@BROWSER_BATCH
def test_a_broken_link_scores_below(batch):
    result, v = batch[0]["broken_link"]
    assert not result.passed and v.components["structure"] < 1.0
    assert v.score < 0.3 and "more.html" in v.feedback


@BROWSER_BATCH
def test_a_page_that_ignores_clicks_scores_below(batch):
    result, v = batch[0]["ignores_clicks"]
    assert not result.passed and v.components == {
        "structure": 1.0,
        "function": 0.0,
        "appearance": 0.0,
    }
    assert v.score == pytest.approx(0.3)


@BROWSER_BATCH
def test_a_picture_of_the_reference_scores_below(batch):
    """It looks like the reference (SSIM against its screenshot), and scores below it: it has
    none of the elements and does nothing."""
    result, v = batch[0]["picture"]
    shots = {a.path: a.data for a in v.artifacts}
    assert image_similarity(shots["page-0.png"], shots["reference-0.png"]) > 0.8
    assert not result.passed and v.score < 0.3 and v.components["appearance"] == 0.0


@BROWSER_BATCH
def test_a_page_cannot_read_the_plan_the_driver_or_the_network(batch):
    run = program_run(batch[1], (RESULT,))
    seen = read_seen(run, _snoop_key())
    assert not isinstance(seen, str), seen
    assert seen.scenarios[0].values == ("none",), seen.scenarios  # it read nothing
    assert any("example.com" in u for u in seen.failed_requests)
    assert any("driver.py" in u for u in seen.failed_requests)


@BROWSER_BATCH
def test_no_browser_process_outlives_the_batch(batch):
    _no_browser_left()


def _snoop_key() -> str:
    from execrl.sandbox.verifiers.web import _key_of
    from execrl.tasks.suites.web_answer import parse_answer

    return _key_of(parse_answer(SNOOP), VerifyRequest("web/snoop", SNOOP, SNOOP_TESTS, Limits()))


@pytest.mark.slow  # waits for the driver's deadline
def test_a_page_that_hangs_times_out_and_leaves_no_process(web_sandbox):
    hang = REFERENCE.replace("let n =", "while (true) {}\nlet n =")
    (result,) = web_sandbox.run_many([Job(hang, TESTS, limits=Limits(wall_s=3), id="web/hang")])
    v = verification_of(result)
    assert v is not None and not result.passed and v.score < 0.3, (result.verdict, v)
    _no_browser_left()


@pytest.mark.slow
def test_a_page_that_eats_memory_is_stopped(web_sandbox):
    hog = REFERENCE.replace(
        "let n =", "const hog = []; for (;;) hog.push(new Array(1e6).fill(1));\nlet n ="
    )
    (result,) = web_sandbox.run_many([Job(hog, TESTS, limits=Limits(wall_s=3), id="web/hog")])
    v = verification_of(result)
    assert v is not None and not result.passed and v.score < 0.3
    assert result.peak_memory_kb < 4 << 20
    _no_browser_left()


@pytest.mark.slow
def test_the_screenshot_itself_as_the_page_scores_below(web_sandbox):
    """The picture hack at its strongest: the reference's own screenshot, shown full size."""
    (first,) = web_sandbox.run_many([Job(REFERENCE, TESTS, limits=Limits(wall_s=3), id="web/r")])
    shot = next(a.data for a in verification_of(first).artifacts if a.path == "reference-0.png")
    src = "data:image/png;base64," + base64.b64encode(shot).decode()
    page = f'<html><body style="margin:0"><img src="{src}" /></body></html>'
    (result,) = web_sandbox.run_many([Job(page, TESTS, limits=Limits(wall_s=3), id="web/p")])
    v = verification_of(result)
    shots = {a.path: a.data for a in v.artifacts}
    assert image_similarity(shots["page-0.png"], shots["reference-0.png"]) > 0.95
    assert not result.passed and v.score < 0.3


@pytest.mark.slow  # every template with every hack: about 70 browser runs
@pytest.mark.parametrize("template", [*LEVEL_1, *LEVEL_2, *LEVEL_3], ids=lambda t: t.__name__)
def test_every_template_scores_its_reference_first_and_each_hack_below(web_sandbox, template):
    drawn = template(random.Random(11))
    tests = VerifierTests("web", spec_of(drawn))
    programs = [format_answer(drawn.files)] + [
        format_answer(make(drawn.files, drawn.links, (400, 300))) for make in WRONG.values()
    ]
    jobs = [Job(p, tests, limits=Limits(wall_s=3), id=f"web/{i}") for i, p in enumerate(programs)]
    results = web_sandbox.run_many(jobs)
    scores = [verification_of(r).score for r in results]
    assert results[0].verdict is Verdict.PASSED and scores[0] == 1.0, results[0].message
    for kind, result, score in zip(WRONG, results[1:], scores[1:], strict=True):
        assert not result.passed and score < 1.0, (kind, score, result.message)


@pytest.mark.slow  # a dozen browser runs
def test_tasks_validate_passes_on_the_web_suite(capsys):
    needs_browser()
    assert main(["tasks", "validate", "web:split=test,n=1"]) == 0
    assert (
        "3/3 reference solutions pass; 0 known defect(s), 0 new failure(s)"
        in capsys.readouterr().out
    )
