"""Wrong answers for a `web` task, made from its reference site: the hacks the verifier's cascade
must score below the reference (`execrl tasks validate web`, tests/verifiers/test_web_hacks.py).

- `picture`: the entry page drawn as a picture of the reference without working: one <img>
  whose source is an SVG holding the reference's body and styles (a browser draws it as the
  page looks, no script runs in it, nothing in it can be clicked); no other file.
- `js_error`: the reference plus a script that throws an uncaught error once the page loads.
- `broken_link`: the reference with its first required link pointing at a file that does not
  exist (a link to a missing page added where the task requires none).
- `ignores_clicks`: the reference with no script loaded: it looks the same and does nothing
  (a site of links alone gets a script that swallows every click instead).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Sequence

from execrl.tasks.suites.web_answer import WebFile

_SCRIPT = re.compile(r"<script\b[^>]*>.*?</script>\s*", re.S | re.I)
_HANDLER = re.compile(r"\son[a-z]+=\"[^\"]*\"", re.I)
_STYLE = re.compile(r"<style>(.*?)</style>", re.S)
_SHEET = re.compile(r'<link rel="stylesheet" href="([^"]+)"\s*/>')
_BODY = re.compile(r"<body>(.*)</body>", re.S)
SWALLOW = '<script>document.addEventListener("click", (e) => e.preventDefault(), true);</script>\n'
THROW = '<script>window.addEventListener("load", () => { undefinedHelper(); });</script>\n'


def picture(
    files: Sequence[WebFile], links: Sequence[dict], size: tuple[int, int]
) -> tuple[WebFile, ...]:
    entry = files[0].text
    texts = {f.name: f.text for f in files}
    css = "".join(_STYLE.findall(entry)) + "".join(texts.get(s, "") for s in _SHEET.findall(entry))
    body = _BODY.search(entry)
    inner = _SCRIPT.sub("", body.group(1) if body else "")
    width, height = size
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">'
        f'<foreignObject width="100%" height="100%"><div xmlns="http://www.w3.org/1999/xhtml">'
        f"<style>{css}</style>{inner}</div></foreignObject></svg>"
    )
    data = base64.b64encode(svg.encode()).decode()
    html = (
        '<!DOCTYPE html>\n<html><body style="margin: 0">'
        f'<img alt="" src="data:image/svg+xml;base64,{data}" /></body></html>\n'
    )
    return (WebFile(files[0].name, html),)


def js_error(
    files: Sequence[WebFile], links: Sequence[dict], size: tuple[int, int]
) -> tuple[WebFile, ...]:
    first = files[0]
    return (WebFile(first.name, first.text.replace("</body>", THROW + "</body>", 1)), *files[1:])


def broken_link(
    files: Sequence[WebFile], links: Sequence[dict], size: tuple[int, int]
) -> tuple[WebFile, ...]:
    if links:
        page, target = links[0]["page"], links[0]["to"]
        missing = target.replace(".html", "-page.html")
        return tuple(
            WebFile(f.name, f.text.replace(f'href="{target}"', f'href="{missing}"'))
            if f.name == page
            else f
            for f in files
        )
    first = files[0]
    text = first.text.replace("<body>\n", '<body>\n<a href="more.html">More</a>\n', 1)
    return (WebFile(first.name, text), *files[1:])


def ignores_clicks(
    files: Sequence[WebFile], links: Sequence[dict], size: tuple[int, int]
) -> tuple[WebFile, ...]:
    if not any(_SCRIPT.search(f.text) for f in files):  # links only: swallow every click
        return tuple(
            WebFile(f.name, f.text.replace("</body>", SWALLOW + "</body>", 1)) for f in files
        )
    # The script files stay (nothing loads them), so the files the task requires are there.
    return tuple(
        WebFile(f.name, _HANDLER.sub("", _SCRIPT.sub("", f.text)))
        if f.name.endswith(".html")
        else f
        for f in files
    )


WRONG: dict[
    str, Callable[[Sequence[WebFile], Sequence[dict], tuple[int, int]], tuple[WebFile, ...]]
]
WRONG = {
    "picture": picture,
    "js_error": js_error,
    "broken_link": broken_link,
    "ignores_clicks": ignores_clicks,
}
