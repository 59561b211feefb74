"""The `web` verifier without a browser: the answer format, the spec's errors, and the cascade's
scoring on observations written by hand (docs/verifiers.md, "web")."""

from __future__ import annotations

import io
import random

import pytest

from execrl.sandbox import Limits, Verdict
from execrl.sandbox.verifiers import VerifierSpecError, VerifyRequest
from execrl.sandbox.verifiers.web import WebVerifier
from execrl.sandbox.verifiers.web_score import appearance, cascade, function, structure
from execrl.sandbox.verifiers.web_seen import PageSeen, ScenarioSeen, Seen
from execrl.sandbox.verifiers.web_spec import parse_spec, plan_of
from execrl.tasks.schema import VerifierTests
from execrl.tasks.suites.web import spec_of, task_of
from execrl.tasks.suites.web_answer import AnswerFormatError, WebFile, format_answer, parse_answer
from execrl.tasks.suites.web_pages import counter
from execrl.tasks.suites.web_sites import two_pages
from execrl.tasks.suites.web_wrong import WRONG

ORIGIN = "http://site.test"


def _png(shade: int) -> bytes:
    from PIL import Image

    image = Image.new("L", (40, 30), shade)
    for x in range(0, 40, 4):
        image.putpixel((x, 10), 255 - shade)
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


SITE = two_pages(random.Random(0))
SPEC = parse_spec("web/t", spec_of(SITE))
NAMES = [f.name for f in SITE.files]


def _seen(links=None, counts=(1, 2, 1), values=None, errors=(), failed=(), shot=None) -> Seen:
    links = links or {
        "index.html": (f"{ORIGIN}/index.html", f"{ORIGIN}/about.html"),
        "about.html": (f"{ORIGIN}/index.html", f"{ORIGIN}/about.html"),
    }
    topic = SITE.scenarios[1]["expect"][1]["text"]
    values = values or [("about.html", "About us"), ("index.html", topic)]
    return Seen(
        status="ok",
        pages=tuple(PageSeen(p, 200, "", links[p], shot) for p in ("index.html", "about.html")),
        element_counts=counts,
        scenarios=tuple(ScenarioSeen(v, "") for v in values),
        failed_requests=tuple(failed),
        js_errors=tuple(errors),
    )


def test_the_answer_format_round_trips_and_names_what_is_wrong():
    files = (WebFile("index.html", "<p>hi</p>\n"), WebFile("js/app.js", "let x = 1;\n"))
    assert parse_answer(format_answer(files)) == files
    assert parse_answer("<p>one page</p>") == (WebFile("index.html", "<p>one page</p>\n"),)
    with pytest.raises(AnswerFormatError, match="text before the first"):
        parse_answer("hello\n<!-- file: index.html -->\n<p></p>")
    with pytest.raises(AnswerFormatError, match="'../secret.html'"):
        parse_answer("<!-- file: ../secret.html -->\nx")
    with pytest.raises(AnswerFormatError, match="given twice"):
        parse_answer("<!-- file: a.html -->\nx\n<!-- file: a.html -->\ny")
    with pytest.raises(AnswerFormatError, match="empty"):
        parse_answer("  \n")


def test_a_malformed_spec_names_the_task_and_the_field():
    bad = {
        **spec_of(SITE),
        "scenarios": [
            {
                "page": "index.html",
                "actions": [{"do": "hover", "selector": "a"}],
                "expect": [{"url": "x"}],
            }
        ],
    }
    with pytest.raises(
        VerifierSpecError, match=r"task web/9: .*spec.scenarios\[0\].actions\[0\].do"
    ):
        parse_spec("web/9", bad)
    with pytest.raises(VerifierSpecError, match="spec.pages"):
        parse_spec("web/9", {**spec_of(SITE), "pages": []})
    with pytest.raises(VerifierSpecError, match=r"expect\[0\] needs exactly one"):
        parse_spec(
            "web/9",
            {**spec_of(SITE), "scenarios": [{"page": "a.html", "expect": [{"selector": "p"}]}]},
        )


def test_the_plan_a_run_gets_holds_no_expected_value():
    spec = parse_spec("web/c", spec_of(counter(random.Random(3))))
    plan = repr(plan_of(spec))
    expected = [str(x.value) for s in spec.scenarios for x in s.expectations]
    assert expected and not any(f"'{v}'" in plan for v in expected)
    assert "'min'" not in plan and "reference" not in plan


def test_the_cascade_gates_by_hand():
    # score = 0.3 S + 0.5 [S=1] F + 0.2 [S=1, F=1] A
    assert cascade(1.0, 1.0, 1.0).score == pytest.approx(1.0)
    assert cascade(1.0, 1.0, 0.5).score == pytest.approx(0.3 + 0.5 + 0.1)
    assert cascade(1.0, 0.5, 1.0).score == pytest.approx(0.3 + 0.25)  # appearance gated off
    assert cascade(0.8, 1.0, 1.0).score == pytest.approx(0.24)  # function and appearance off
    assert cascade(0.8, 1.0, 1.0).components() == {
        "structure": 0.8,
        "function": 0.0,
        "appearance": 0.0,
    }
    assert cascade(1.0, 1.0, 0.2).passed and not cascade(1.0, 0.99, 1.0).passed


def test_structure_counts_requirements_and_broken_links():
    assert structure(SPEC, NAMES, _seen(), ORIGIN).value == 1.0
    # 3 files + 2 pages + 3 elements + 2 links = 10 requirements; a broken link is an 11th.
    broken = _seen(links={"index.html": (f"{ORIGIN}/index.html", f"{ORIGIN}/about.html", f"{ORIGIN}/gone.html"),
                          "about.html": (f"{ORIGIN}/index.html",)})  # fmt: skip
    stage = structure(SPEC, NAMES, broken, ORIGIN)
    assert stage.value == pytest.approx(10 / 11)
    assert any("gone.html" in p for p in stage.problems)
    # style.css missing: 9 of 10; a request for it is also a failure the site could not serve
    missing = structure(
        SPEC, ["index.html", "about.html"], _seen(failed=[f"{ORIGIN}/style.css"]), ORIGIN
    )
    assert missing.value == pytest.approx(9 / 11)
    # no nav links at all: both required links fail, and the element `nav a` (min 2)
    bare = _seen(links={"index.html": (), "about.html": ()}, counts=(1, 0, 1))
    assert structure(SPEC, NAMES, bare, ORIGIN).value == pytest.approx(7 / 10)
    # another origin's link is not the site's business; its requests are (no network)
    outside = _seen(failed=["https://cdn.example.com/lib.js"])
    assert structure(SPEC, NAMES, outside, ORIGIN).value == pytest.approx(10 / 11)


def test_function_counts_expectations_and_halves_on_an_uncaught_error():
    assert function(SPEC, _seen()).value == 1.0
    wrong = _seen(values=[("about.html", "About"), ("index.html", "x")])  # 2 of 4 right
    assert function(SPEC, wrong).value == pytest.approx(0.5)
    assert function(SPEC, _seen(errors=["ReferenceError: f is not defined"])).value == 0.5
    stopped = Seen(
        "ok", _seen().pages, (1, 2, 1), (ScenarioSeen(("about.html",), "Timeout"),), (), ()
    )
    stage = function(SPEC, stopped)  # 1 right of 4; the second scenario never ran
    assert stage.value == pytest.approx(0.25)
    assert any("stopped: Timeout" in p for p in stage.problems)
    assert any("only 1 of 2 scenarios ran" in p for p in stage.problems)


def test_appearance_is_ssim_against_the_reference_shots():
    same = appearance(_seen(shot=_png(40)), _seen(shot=_png(40)), SPEC.pages)
    other = appearance(_seen(shot=_png(200)), _seen(shot=_png(40)), SPEC.pages)
    none = appearance(_seen(shot=None), _seen(shot=_png(40)), SPEC.pages)
    assert same.value == 1.0 and 0.0 <= other.value < 0.5 and none.value == 0.0


def test_every_wrong_kind_changes_the_reference_and_keeps_the_format():
    drawn = two_pages(random.Random(1))
    for kind, make in WRONG.items():
        files = make(drawn.files, drawn.links, (400, 300))
        assert files != drawn.files, kind
        assert parse_answer(format_answer(files)) == files
        task = task_of(drawn, kind)
        assert task.tests.wrong and task.tests.wrong != task.reference


def test_an_answer_that_is_not_a_site_fails_without_a_run():
    bad = "Here is my page.\n<!-- file: index.html -->\n<p>hi</p>\n"
    request = VerifyRequest("web/x", bad, VerifierTests("web", spec_of(SITE)), Limits())
    verification = WebVerifier().verify(request, [])
    assert verification.verdict is Verdict.WRONG_ANSWER and verification.score == 0.0
    assert "not a site: text before the first" in verification.feedback
