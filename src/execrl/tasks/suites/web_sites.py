"""The `web` suite's level-3 tasks: sites of several files (pages linked by a navigation bar, a
stylesheet and a script of their own), each drawn with its own names and numbers."""

from __future__ import annotations

import random

from execrl.tasks.suites.web_answer import WebFile
from execrl.tasks.suites.web_pages import (
    BASE_STYLE,
    FRUITS,
    TOPICS,
    WebTask,
    click,
    element,
    fill,
    page,
    scenario,
)

NAV_STYLE = BASE_STYLE + "nav a { margin-right: 12px; } h1 { color: #333; }\n"


def _nav(pages: list[tuple[str, str]]) -> str:
    return "<nav>" + " ".join(f'<a href="{f}">{t}</a>' for f, t in pages) + "</nav>"


def two_pages(rng: random.Random) -> WebTask:
    topic = rng.choice(TOPICS)
    year = rng.randint(1950, 2020)
    prompt = (
        f"Make a two-page site for a {topic.lower()}: index.html with the heading (h1) "
        f"'{topic}' and about.html with the heading 'About us' and a paragraph with id `since` "
        f"reading 'Since {year}'. Both pages have a nav bar with links 'Home' (to index.html) "
        "and 'About' (to about.html), and share one stylesheet, style.css."
    )
    nav = _nav([("index.html", "Home"), ("about.html", "About")])
    head = '<link rel="stylesheet" href="style.css" />\n'
    files = (
        WebFile("index.html", page(topic, f"{nav}\n<h1>{topic}</h1>", head=head)),
        WebFile(
            "about.html",
            page("About", f'{nav}\n<h1>About us</h1>\n<p id="since">Since {year}</p>', head=head),
        ),
        WebFile("style.css", NAV_STYLE),
    )
    return WebTask(
        prompt,
        files,
        pages=("index.html", "about.html"),
        elements=(element("h1"), element("nav a", least=2), element("#since", "about.html")),
        links=(
            {"page": "index.html", "to": "about.html"},
            {"page": "about.html", "to": "index.html"},
        ),
        scenarios=(
            scenario(
                [click('nav a[href="about.html"]')],
                [{"url": "about.html"}, {"selector": "h1", "text": "About us"}],
            ),
            scenario(
                [click('nav a[href="index.html"]')],
                [{"url": "index.html"}, {"selector": "h1", "text": topic}],
                at="about.html",
            ),
        ),
    )


def shop_site(rng: random.Random) -> WebTask:
    topic = rng.choice(TOPICS)
    fruits = rng.sample(FRUITS, 3)
    prompt = (
        f"Make a three-page site for a {topic.lower()} shop: index.html (h1 '{topic}'), "
        f"products.html (h1 'Products', a list with id `products` of {', '.join(fruits)}) and "
        "contact.html (h1 'Contact', a form with a text input with id `msg`, a button with id "
        "`send`, and a paragraph with id `sent` that shows 'Sent: TEXT' with the input's text "
        "on click, without leaving the page). Every page has a nav bar linking all three."
    )
    nav = _nav([("index.html", "Home"), ("products.html", "Products"), ("contact.html", "Contact")])
    items = "".join(f"<li>{f}</li>" for f in fruits)
    contact = (
        f'{nav}\n<h1>Contact</h1>\n<form id="form">\n<input id="msg" type="text" />\n'
        '<button id="send" type="submit">Send</button>\n</form>\n<p id="sent"></p>'
    )
    script = (
        'document.getElementById("form").addEventListener("submit", (event) => {\n'
        "  event.preventDefault();\n"
        '  document.getElementById("sent").textContent =\n'
        '    "Sent: " + document.getElementById("msg").value;\n});'
    )
    files = (
        WebFile("index.html", page(topic, f"{nav}\n<h1>{topic}</h1>", NAV_STYLE)),
        WebFile(
            "products.html",
            page(
                "Products", f'{nav}\n<h1>Products</h1>\n<ul id="products">{items}</ul>', NAV_STYLE
            ),
        ),
        WebFile("contact.html", page("Contact", contact, NAV_STYLE, script)),
    )
    pages = ("index.html", "products.html", "contact.html")
    return WebTask(
        prompt,
        files,
        pages=pages,
        elements=(
            element("#products li", "products.html", least=3),
            element("input#msg", "contact.html"),
        ),
        links=tuple({"page": p, "to": q} for p in pages for q in pages if p != q),
        scenarios=(
            scenario(
                [click('nav a[href="products.html"]')],
                [{"url": "products.html"}, {"selector": "#products li", "texts": fruits}],
            ),
            scenario(
                [fill("#msg", "hello"), click("#send")],
                [{"selector": "#sent", "text": "Sent: hello"}, {"url": "contact.html"}],
                at="contact.html",
            ),
        ),
    )


def counter_files(rng: random.Random) -> WebTask:
    step = rng.randint(2, 9)
    prompt = (
        "Make a counter as three files: index.html, style.css (its styles) and app.js (its "
        f"script). A span with id `value` shows 0; a button with id `plus` adds {step}, a "
        "button with id `minus` subtracts 1, and a button with id `reset` sets it back to 0."
    )
    body = (
        '<h1>Tally</h1>\n<p>Value: <span id="value">0</span></p>\n'
        f'<button id="plus">+{step}</button>\n<button id="minus">-1</button>\n'
        '<button id="reset">Reset</button>\n<script src="app.js"></script>'
    )
    script = (
        'let value = 0;\nconst shown = document.getElementById("value");\n'
        "function set(v) { value = v; shown.textContent = String(v); }\n"
        f'document.getElementById("plus").addEventListener("click", () => set(value + {step}));\n'
        'document.getElementById("minus").addEventListener("click", () => set(value - 1));\n'
        'document.getElementById("reset").addEventListener("click", () => set(0));\n'
    )
    files = (
        WebFile(
            "index.html", page("Tally", body, head='<link rel="stylesheet" href="style.css" />\n')
        ),
        WebFile("style.css", BASE_STYLE + "#value { font-weight: bold; font-size: 32px; }\n"),
        WebFile("app.js", script),
    )
    return WebTask(
        prompt,
        files,
        elements=(element("#value"), element("button#plus"), element("button#reset")),
        scenarios=(
            scenario(
                [click("#plus"), click("#plus"), click("#minus")],
                [{"selector": "#value", "text": str(2 * step - 1)}],
            ),
            scenario([click("#plus"), click("#reset")], [{"selector": "#value", "text": "0"}]),
        ),
    )


def quiz(rng: random.Random) -> WebTask:
    a, b = rng.randint(2, 9), rng.randint(2, 9)
    wrong = a * b + rng.choice((-2, -1, 1, 2))
    prompt = (
        f"Make a one-question quiz as index.html and quiz.js: the question 'What is {a} x {b}?', "
        f"two radio buttons with ids `opt-a` (answer {wrong}) and `opt-b` (answer {a * b}), a "
        "button with id `check` and a paragraph with id `verdict`. Clicking the button shows "
        "'Correct!' if the right answer is chosen, 'Try again' otherwise (also when none is)."
    )
    body = (
        f"<h1>Quiz</h1>\n<p>What is {a} x {b}?</p>\n"
        f'<label><input type="radio" name="q" id="opt-a" value="{wrong}" /> {wrong}</label>\n'
        f'<label><input type="radio" name="q" id="opt-b" value="{a * b}" /> {a * b}</label>\n'
        '<button id="check">Check</button>\n<p id="verdict"></p>\n<script src="quiz.js"></script>'
    )
    script = (
        'document.getElementById("check").addEventListener("click", () => {\n'
        '  const right = document.getElementById("opt-b").checked;\n'
        '  document.getElementById("verdict").textContent = right ? "Correct!" : "Try again";\n});\n'
    )
    files = (
        WebFile("index.html", page("Quiz", body, BASE_STYLE)),
        WebFile("quiz.js", script),
    )
    return WebTask(
        prompt,
        files,
        elements=(element("input#opt-a"), element("input#opt-b"), element("button#check")),
        scenarios=(
            scenario(
                [{"do": "check", "selector": "#opt-b"}, click("#check")],
                [
                    {"selector": "#verdict", "text": "Correct!"},
                    {"selector": "#opt-b", "checked": True},
                ],
            ),
            scenario(
                [{"do": "check", "selector": "#opt-a"}, click("#check")],
                [{"selector": "#verdict", "text": "Try again"}],
            ),
        ),
    )


LEVEL_3 = (two_pages, shop_site, counter_files, quiz)
