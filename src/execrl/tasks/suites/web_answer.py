"""The answer format of the `web` suite: a site's files in one fenced block.

    ```html
    <!-- file: index.html -->
    <!DOCTYPE html>
    <html>...</html>
    <!-- file: style.css -->
    body { margin: 0; }
    <!-- file: app.js -->
    document.querySelector("#go").addEventListener("click", ...);
    ```

Each file starts at a line that is only `<!-- file: NAME -->`; everything up to the next such
line is its text. A block with no such line is one page, `index.html`. One block, not one per
file, because code extraction (`rewards.leaves.extract`) and the stop rule
(`models.engines.stop_rules`) take one fenced block of the task's language: a site split over
several blocks would lose all but one of its files. Names are relative paths of letters, digits,
`-`, `_` and `/` ending in one of `EXTENSIONS`; the verifier serves exactly these files and nothing
else.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

EXTENSIONS = (".html", ".css", ".js", ".svg", ".json", ".txt")
MAX_FILES = 16
MAX_BYTES = 256 << 10  # the whole site
_MARKER = re.compile(r"^[ \t]*<!--[ \t]*file:[ \t]*(\S+)[ \t]*-->[ \t]*$", re.M)
_NAME = re.compile(r"[A-Za-z0-9_-]+(/[A-Za-z0-9_-]+)*\.[a-z]+")


class AnswerFormatError(ValueError):
    """An answer that is not a site in the format above; the message says what to fix."""


@dataclass(frozen=True, slots=True)
class WebFile:
    """One file of a site: its path relative to the site's root, and its text."""

    name: str
    text: str


def parse_answer(answer: str) -> tuple[WebFile, ...]:
    """The files of an answer in the format above (the fence already taken off)."""
    markers = list(_MARKER.finditer(answer))
    if not markers:
        if not answer.strip():
            raise AnswerFormatError("the answer is empty: write index.html at least")
        files = [WebFile("index.html", answer.strip("\n") + "\n")]
    else:
        head = answer[: markers[0].start()]
        if head.strip():
            raise AnswerFormatError(
                "text before the first `<!-- file: NAME -->` line: start the block with one"
            )
        files = []
        for i, marker in enumerate(markers):
            end = markers[i + 1].start() if i + 1 < len(markers) else len(answer)
            body = answer[marker.end() : end].strip("\n")
            files.append(WebFile(marker.group(1), body + "\n"))
    _check(files)
    return tuple(files)


def format_answer(files: Sequence[WebFile]) -> str:
    """The answer text of `files` (inverse of `parse_answer`)."""
    _check(files)
    return "".join(f"<!-- file: {f.name} -->\n{f.text.strip(chr(10))}\n" for f in files)


def _check(files: Sequence[WebFile]) -> None:
    names = [f.name for f in files]
    for name in names:
        if not _NAME.fullmatch(name) or not name.endswith(EXTENSIONS):
            raise AnswerFormatError(
                f"file name {name!r}: use a relative path of letters, digits, -, _ and / "
                f"ending in one of {', '.join(EXTENSIONS)}"
            )
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise AnswerFormatError(f"file {duplicated[0]!r} is given twice")
    if len(files) > MAX_FILES:
        raise AnswerFormatError(f"{len(files)} files: at most {MAX_FILES}")
    size = sum(len(f.text.encode()) for f in files)
    if size > MAX_BYTES:
        raise AnswerFormatError(f"the site is {size} bytes: at most {MAX_BYTES}")
