"""The `web` suite: build a page or a small site (HTML, CSS, JavaScript) from a description,
graded by the `web` verifier in headless Chromium (docs/verifiers.md): structure, then
function, then appearance against the reference's screenshots.

Level 1: one page, one interaction (a counter, a toggle, a greeting, a character count, colour
buttons). Level 2: one page with a form or a list (sign-up validation, a todo list, tabs, a
table sorted on click, a converter). Level 3: several files (a two- or three-page site with a
navigation bar, a counter split into HTML, CSS and JavaScript, a quiz with its script). Each
template draws its own labels and numbers; the reference is the template's site, the checks
are written beside it (`web_pages`, `web_sites`), and the wrong answer is one of the hacks of
`web_wrong` made from the reference, drawn per task.
"""

from __future__ import annotations

import random
from pathlib import Path

from execrl.tasks.schema import Task, VerifierTests
from execrl.tasks.suites.web_answer import format_answer
from execrl.tasks.suites.web_pages import LEVEL_1, LEVEL_2, WebTask
from execrl.tasks.suites.web_sites import LEVEL_3
from execrl.tasks.suites.web_wrong import WRONG

TEMPLATES = {1: LEVEL_1, 2: LEVEL_2, 3: LEVEL_3}
VIEWPORT = (400, 300)
ANSWER = (
    "\nAnswer with the whole site in one ``` block. Start each file with a line "
    "`<!-- file: NAME -->` (index.html first); a block without such lines is index.html alone. "
    "The site runs offline: use no file from another site."
)


def make(rng: random.Random, level: int, data_dir: Path | None = None) -> Task | None:
    drawn = rng.choice(TEMPLATES[level])(rng)
    wrong_kind = rng.choice(sorted(WRONG))
    return task_of(drawn, wrong_kind)


def task_of(drawn: WebTask, wrong_kind: str) -> Task:
    """The suite's task for a drawn template, with the wrong answer of `wrong_kind`."""
    spec = spec_of(drawn)
    wrong = WRONG[wrong_kind](drawn.files, drawn.links, VIEWPORT)
    return Task(
        id="",
        prompt=drawn.prompt + ANSWER,
        tests=VerifierTests("web", spec, format_answer(wrong)),
        reference=spec["reference"],
        language="html",
        metadata={"wrong_kind": wrong_kind},
    )


def spec_of(drawn: WebTask) -> dict:
    """The verifier's data (web_spec): every file of the reference is required."""
    return {
        "reference": format_answer(drawn.files),
        "files": [f.name for f in drawn.files],
        "pages": list(drawn.pages),
        "elements": list(drawn.elements),
        "links": list(drawn.links),
        "scenarios": list(drawn.scenarios),
        "viewport": list(VIEWPORT),
    }
