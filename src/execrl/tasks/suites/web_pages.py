"""The `web` suite's one-page tasks (levels 1 and 2), each drawn with its own labels and numbers:
a reference page and the checks the `web` verifier runs (`sandbox/verifiers/web_spec.py`).

Pages are written as XHTML-compatible HTML (void elements closed, attributes quoted), so a
page's body can also be drawn as a picture (`web_wrong.picture`). Scripts use addEventListener
and element ids the prompt names, since the checks drive those ids.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from execrl.tasks.suites.web_answer import WebFile

COLORS = ("red", "green", "blue", "orange", "purple", "teal")
NAMES = ("Ada", "Grace", "Linus", "Radia", "Ken", "Barbara", "Edsger", "Frances")
FRUITS = ("apple", "banana", "cherry", "mango", "pear", "plum", "kiwi", "lemon")
TOPICS = ("Garden", "Library", "Bakery", "Workshop", "Studio", "Harbour")


@dataclass(frozen=True, slots=True)
class WebTask:
    """A drawn task: what the model is asked, the reference site and its checks."""

    prompt: str
    files: tuple[WebFile, ...]
    pages: tuple[str, ...] = ("index.html",)
    elements: tuple[dict[str, Any], ...] = ()
    links: tuple[dict[str, Any], ...] = ()
    scenarios: tuple[dict[str, Any], ...] = field(default_factory=tuple)


def page(title: str, body: str, style: str = "", script: str = "", head: str = "") -> str:
    """A whole page; `style` and `script` inline, `head` for links to other files."""
    css = f"<style>\n{style.strip()}\n</style>\n" if style else ""
    js = f"<script>\n{script.strip()}\n</script>\n" if script else ""
    return (
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8" />\n'
        f"<title>{title}</title>\n{head}{css}</head>\n<body>\n{body.strip()}\n{js}</body>\n</html>\n"
    )


def element(selector: str, at: str = "index.html", least: int = 1) -> dict[str, Any]:
    return {"page": at, "selector": selector, "min": least}


def scenario(actions: list[dict[str, Any]], expect: list[dict[str, Any]], at: str = "index.html"):
    return {"page": at, "actions": actions, "expect": expect}


def click(selector: str) -> dict[str, Any]:
    return {"do": "click", "selector": selector}


def fill(selector: str, text: str) -> dict[str, Any]:
    return {"do": "fill", "selector": selector, "text": text}


BASE_STYLE = "body { font-family: sans-serif; margin: 16px; }\n"


def counter(rng: random.Random) -> WebTask:
    start, step = rng.randint(0, 20), rng.randint(1, 5)
    label = rng.choice(("Add", "Increase", "More", "Plus"))
    prompt = (
        f"Make a page with a number shown in an element with id `count`, starting at {start}, "
        f"and a button with id `inc` labelled '{label} {step}' that adds {step} to it on each click."
    )
    body = f'<h1>Counter</h1>\n<p id="count">{start}</p>\n<button id="inc">{label} {step}</button>'
    script = (
        f'let n = {start};\ndocument.getElementById("inc").addEventListener("click", () => {{\n'
        f'  n += {step};\n  document.getElementById("count").textContent = String(n);\n}});'
    )
    style = BASE_STYLE + "#count { font-size: 48px; color: #246; }"
    return WebTask(
        prompt,
        (WebFile("index.html", page("Counter", body, style, script)),),
        elements=(element("#count"), element("button#inc")),
        scenarios=(
            scenario([click("#inc")], [{"selector": "#count", "text": str(start + step)}]),
            scenario([click("#inc")] * 3, [{"selector": "#count", "text": str(start + 3 * step)}]),
        ),
    )


def toggle(rng: random.Random) -> WebTask:
    topic = rng.choice(TOPICS)
    prompt = (
        f"Make a page about a {topic.lower()} with a button with id `toggle` labelled 'Details' "
        f"and a panel with id `details` holding the text 'Open daily from 9 to 5.'. The panel is "
        "hidden when the page loads; each click on the button shows it if hidden, hides it if shown."
    )
    body = (
        f'<h1>{topic}</h1>\n<button id="toggle">Details</button>\n'
        '<div id="details" hidden="hidden">Open daily from 9 to 5.</div>'
    )
    script = (
        'const panel = document.getElementById("details");\n'
        'document.getElementById("toggle").addEventListener("click", () => {\n'
        "  panel.hidden = !panel.hidden;\n});"
    )
    style = BASE_STYLE + "#details { padding: 8px; background: #ffd; }"
    return WebTask(
        prompt,
        (WebFile("index.html", page(topic, body, style, script)),),
        elements=(element("button#toggle"), element("#details")),
        scenarios=(
            scenario([], [{"selector": "#details", "visible": False}]),
            scenario(
                [click("#toggle")],
                [
                    {"selector": "#details", "visible": True},
                    {"selector": "#details", "text": "Open daily from 9 to 5."},
                ],
            ),
            scenario(
                [click("#toggle"), click("#toggle")], [{"selector": "#details", "visible": False}]
            ),
        ),
    )


def greeting(rng: random.Random) -> WebTask:
    word = rng.choice(("Hello", "Welcome", "Hi", "Greetings"))
    name = rng.choice(NAMES)
    prompt = (
        "Make a page with a text input with id `name`, a button with id `greet` and a paragraph "
        f"with id `greeting`, empty at first. Clicking the button shows '{word}, NAME!' in the "
        "paragraph, NAME being the input's text with surrounding spaces removed; with an empty "
        "name it shows 'Please enter a name.'."
    )
    body = (
        '<h1>Greeter</h1>\n<input id="name" type="text" />\n<button id="greet">Greet</button>\n'
        '<p id="greeting"></p>'
    )
    script = (
        'document.getElementById("greet").addEventListener("click", () => {\n'
        '  const name = document.getElementById("name").value.trim();\n'
        '  document.getElementById("greeting").textContent =\n'
        f'    name ? "{word}, " + name + "!" : "Please enter a name.";\n}});'
    )
    return WebTask(
        prompt,
        (WebFile("index.html", page("Greeter", body, BASE_STYLE, script)),),
        elements=(element("input#name"), element("button#greet"), element("#greeting")),
        scenarios=(
            scenario(
                [fill("#name", f"  {name} "), click("#greet")],
                [{"selector": "#greeting", "text": f"{word}, {name}!"}],
            ),
            scenario(
                [click("#greet")], [{"selector": "#greeting", "text": "Please enter a name."}]
            ),
        ),
    )


def remaining(rng: random.Random) -> WebTask:
    limit = rng.choice((20, 40, 60, 80, 140))
    text = rng.choice(FRUITS) + " " + rng.choice(FRUITS)
    prompt = (
        f"Make a page with a textarea with id `text` and a span with id `left` showing how many "
        f"of {limit} characters are left: {limit} at first, updated on every input."
    )
    body = (
        '<h1>Message</h1>\n<textarea id="text" rows="3" cols="30"></textarea>\n'
        f'<p><span id="left">{limit}</span> characters left</p>'
    )
    script = (
        'const box = document.getElementById("text");\n'
        'box.addEventListener("input", () => {\n'
        f'  document.getElementById("left").textContent = String({limit} - box.value.length);\n}});'
    )
    return WebTask(
        prompt,
        (WebFile("index.html", page("Message", body, BASE_STYLE, script)),),
        elements=(element("textarea#text"), element("#left")),
        scenarios=(
            scenario([], [{"selector": "#left", "text": str(limit)}]),
            scenario(
                [fill("#text", text)], [{"selector": "#left", "text": str(limit - len(text))}]
            ),
        ),
    )


def swatch(rng: random.Random) -> WebTask:
    colors = rng.sample(COLORS, 3)
    ids = ", ".join(f"`pick-{c}`" for c in colors)
    prompt = (
        f"Make a page with three buttons with ids {ids}, labelled with their colour's name, and a "
        f"box with id `swatch` that reads 'none' at first. Clicking a button writes its colour's "
        "name in the box and sets the box's background to that colour."
    )
    buttons = "\n".join(f'<button id="pick-{c}">{c}</button>' for c in colors)
    body = f'<h1>Colours</h1>\n{buttons}\n<div id="swatch">none</div>'
    script = (
        'const box = document.getElementById("swatch");\n'
        f"for (const c of {colors!r}) {{\n"
        '  document.getElementById("pick-" + c).addEventListener("click", () => {\n'
        "    box.textContent = c;\n    box.style.background = c;\n  });\n}"
    )
    style = BASE_STYLE + "#swatch { width: 160px; height: 60px; border: 1px solid #000; }"
    first, last = colors[0], colors[2]
    return WebTask(
        prompt,
        (WebFile("index.html", page("Colours", body, style, script)),),
        elements=tuple(element(f"button#pick-{c}") for c in colors) + (element("#swatch"),),
        scenarios=(
            scenario([click(f"#pick-{last}")], [{"selector": "#swatch", "text": last}]),
            scenario(
                [click(f"#pick-{last}"), click(f"#pick-{first}")],
                [{"selector": "#swatch", "text": first}],
            ),
        ),
    )


def signup(rng: random.Random) -> WebTask:
    least = rng.randint(6, 10)
    name = rng.choice(NAMES).lower()
    prompt = (
        "Make a sign-up form with id `signup`: an email input with id `email`, a password input "
        f"with id `password` and a submit button with id `submit`. On submit (without reloading "
        "the page) check the fields: an email without '@' shows 'Invalid email' in a paragraph "
        f"with id `error`; a password shorter than {least} characters shows 'Password too "
        f"short'; otherwise `error` is emptied and a paragraph with id `done` shows 'Thank you'."
    )
    body = (
        '<h1>Sign up</h1>\n<form id="signup">\n<input id="email" type="text" />\n'
        '<input id="password" type="password" />\n<button id="submit" type="submit">Join</button>\n'
        '</form>\n<p id="error"></p>\n<p id="done"></p>'
    )
    script = (
        'document.getElementById("signup").addEventListener("submit", (event) => {\n'
        "  event.preventDefault();\n"
        '  const email = document.getElementById("email").value;\n'
        '  const password = document.getElementById("password").value;\n'
        '  const error = document.getElementById("error");\n'
        '  if (!email.includes("@")) { error.textContent = "Invalid email"; return; }\n'
        f'  if (password.length < {least}) {{ error.textContent = "Password too short"; return; }}\n'
        '  error.textContent = "";\n'
        '  document.getElementById("done").textContent = "Thank you";\n});'
    )
    good, short = "x" * least, "x" * (least - 1)
    return WebTask(
        prompt,
        (
            WebFile(
                "index.html", page("Sign up", body, BASE_STYLE + "#error { color: #b00; }", script)
            ),
        ),
        elements=(element("form#signup"), element("input#email"), element("input#password")),
        scenarios=(
            scenario(
                [fill("#email", name), fill("#password", good), click("#submit")],
                [{"selector": "#error", "text": "Invalid email"}, {"url": "index.html"}],
            ),
            scenario(
                [fill("#email", f"{name}@example.org"), fill("#password", short), click("#submit")],
                [{"selector": "#error", "text": "Password too short"}],
            ),
            scenario(
                [fill("#email", f"{name}@example.org"), fill("#password", good), click("#submit")],
                [{"selector": "#error", "text": ""}, {"selector": "#done", "text": "Thank you"}],
            ),
        ),
    )


def todo(rng: random.Random) -> WebTask:
    items = rng.sample(FRUITS, 3)
    prompt = (
        "Make a todo list: a text input with id `item`, a button with id `add` and a list with "
        "id `list`. Clicking the button appends the input's text as a new <li> of the list and "
        "clears the input; an empty input adds nothing. A paragraph with id `total` shows "
        "'N items' (N the number of items, '0 items' at first)."
    )
    body = (
        '<h1>Todo</h1>\n<input id="item" type="text" />\n<button id="add">Add</button>\n'
        '<ul id="list"></ul>\n<p id="total">0 items</p>'
    )
    script = (
        'const list = document.getElementById("list");\n'
        'const input = document.getElementById("item");\n'
        'document.getElementById("add").addEventListener("click", () => {\n'
        "  const text = input.value.trim();\n  if (!text) return;\n"
        '  const li = document.createElement("li");\n  li.textContent = text;\n'
        '  list.appendChild(li);\n  input.value = "";\n'
        '  document.getElementById("total").textContent = list.children.length + " items";\n});'
    )
    adds = [a for it in items for a in (fill("#item", it), click("#add"))]
    return WebTask(
        prompt,
        (WebFile("index.html", page("Todo", body, BASE_STYLE, script)),),
        elements=(element("input#item"), element("button#add"), element("#list")),
        scenarios=(
            scenario(
                adds,
                [
                    {"selector": "#list li", "texts": items},
                    {"selector": "#total", "text": "3 items"},
                    {"selector": "#item", "value": ""},
                ],
            ),
            scenario([click("#add")], [{"selector": "#list li", "count": 0}]),
        ),
    )


def tabs(rng: random.Random) -> WebTask:
    names = rng.sample(("Home", "News", "Prices", "Team", "Contact", "Help"), 3)
    texts = [f"This is the {n.lower()} tab." for n in names]
    prompt = (
        "Make three tabs: buttons with ids `tab-1`, `tab-2`, `tab-3` labelled "
        f"{', '.join(repr(n) for n in names)}, and panels with ids `panel-1`, `panel-2`, "
        f"`panel-3` holding {', '.join(repr(t) for t in texts)}. Only panel 1 shows at first; "
        "clicking a tab shows its panel and hides the others."
    )
    buttons = "\n".join(f'<button id="tab-{i}">{n}</button>' for i, n in enumerate(names, 1))
    hidden = ["", ' hidden="hidden"', ' hidden="hidden"']
    panels = "\n".join(
        f'<div id="panel-{i}" class="panel"{hidden[i - 1]}>{t}</div>'
        for i, t in enumerate(texts, 1)
    )
    script = (
        "for (let i = 1; i <= 3; i++) {\n"
        '  document.getElementById("tab-" + i).addEventListener("click", () => {\n'
        "    for (let j = 1; j <= 3; j++) {\n"
        '      document.getElementById("panel-" + j).hidden = j !== i;\n    }\n  });\n}'
    )
    style = BASE_STYLE + ".panel { border: 1px solid #888; padding: 12px; }"
    return WebTask(
        prompt,
        (WebFile("index.html", page("Tabs", f"{buttons}\n{panels}", style, script)),),
        elements=tuple(element(f"#tab-{i}") for i in (1, 2, 3))
        + tuple(element(f"#panel-{i}") for i in (1, 2, 3)),
        scenarios=(
            scenario(
                [],
                [
                    {"selector": "#panel-1", "visible": True},
                    {"selector": "#panel-2", "visible": False},
                ],
            ),
            scenario(
                [click("#tab-3")],
                [
                    {"selector": "#panel-3", "visible": True},
                    {"selector": "#panel-3", "text": texts[2]},
                    {"selector": "#panel-1", "visible": False},
                ],
            ),
        ),
    )


def sort_table(rng: random.Random) -> WebTask:
    rows = list(zip(rng.sample(FRUITS, 4), rng.sample(range(1, 60), 4), strict=True))
    prompt = (
        "Make a table with id `prices` with a header row (header cells with ids `by-name` "
        "'Fruit' and `by-price` 'Price') and one body row per fruit, in this order: "
        + ", ".join(f"{f} {p}" for f, p in rows)
        + ". Clicking `by-price` sorts the body rows by price, lowest first; clicking `by-name` "
        "sorts them by fruit name."
    )
    trs = "\n".join(f"<tr><td>{f}</td><td>{p}</td></tr>" for f, p in rows)
    body = (
        '<table id="prices">\n<thead><tr><th id="by-name">Fruit</th><th id="by-price">Price</th>'
        f"</tr></thead>\n<tbody>\n{trs}\n</tbody>\n</table>"
    )
    script = (
        'const body = document.querySelector("#prices tbody");\n'
        "function sortBy(key) {\n  const rows = Array.from(body.rows);\n"
        "  rows.sort((a, b) => key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0);\n"
        "  rows.forEach(r => body.appendChild(r));\n}\n"
        'document.getElementById("by-price").addEventListener("click", () =>\n'
        "  sortBy(r => Number(r.cells[1].textContent)));\n"
        'document.getElementById("by-name").addEventListener("click", () =>\n'
        "  sortBy(r => r.cells[0].textContent));"
    )
    style = BASE_STYLE + "th { cursor: pointer; background: #ddd; } td, th { padding: 4px 12px; }"
    first = "#prices tbody tr td:first-child"
    return WebTask(
        prompt,
        (WebFile("index.html", page("Prices", body, style, script)),),
        elements=(element("#prices"), element("#by-price"), element("#prices tbody tr", least=4)),
        scenarios=(
            scenario(
                [click("#by-price")],
                [{"selector": first, "texts": [f for f, _ in sorted(rows, key=lambda r: r[1])]}],
            ),
            scenario(
                [click("#by-price"), click("#by-name")],
                [{"selector": first, "texts": sorted(f for f, _ in rows)}],
            ),
        ),
    )


def converter(rng: random.Random) -> WebTask:
    celsius = rng.choice((-40, -10, 0, 5, 20, 25, 30, 100))
    prompt = (
        "Make a temperature converter: a number input with id `celsius`, a button with id "
        "`convert` and a paragraph with id `result`. Clicking the button shows the temperature "
        "in Fahrenheit as 'F = X' (X = C * 9 / 5 + 32, rounded to one decimal, no trailing '.0')."
    )
    body = (
        '<h1>Converter</h1>\n<input id="celsius" type="number" />\n'
        '<button id="convert">Convert</button>\n<p id="result"></p>'
    )
    script = (
        'document.getElementById("convert").addEventListener("click", () => {\n'
        '  const c = Number(document.getElementById("celsius").value);\n'
        "  const f = Math.round((c * 9 / 5 + 32) * 10) / 10;\n"
        '  document.getElementById("result").textContent = "F = " + f;\n});'
    )
    fahrenheit = round((celsius * 9 / 5 + 32) * 10) / 10
    shown = str(int(fahrenheit)) if fahrenheit == int(fahrenheit) else str(fahrenheit)
    return WebTask(
        prompt,
        (WebFile("index.html", page("Converter", body, BASE_STYLE, script)),),
        elements=(element("input#celsius"), element("button#convert"), element("#result")),
        scenarios=(
            scenario(
                [fill("#celsius", str(celsius)), click("#convert")],
                [{"selector": "#result", "text": f"F = {shown}"}],
            ),
        ),
    )


LEVEL_1 = (counter, toggle, greeting, remaining, swatch)
LEVEL_2 = (signup, todo, tabs, sort_table, converter)
