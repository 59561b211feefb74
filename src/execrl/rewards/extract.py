"""Code extraction from model output: fences with or without a language tag, prose around the
code, reasoning blocks, several blocks.

Rules, in order: code inside reasoning blocks (`<think>...</think>`, or an unclosed `<think>` to
the end) never counts. Among complete fenced blocks tagged Python or untagged, take the last one
that defines the entry point, else the last one. With no complete fence, take the text itself
when it parses, else the longest stretch that starts at a `def`/`class`/`import` line and parses.
Otherwise there is no code: a truncated fence is not a program.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from execrl.rewards.syntax import parses

_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+#.-]*)[^\n]*\n(.*?)^[ \t]*```[ \t]*$", re.M | re.S)
_PYTHON_TAGS = frozenset({"", "python", "py", "python3", "py3"})
_CODE_START = re.compile(r"^(def |async def |class |import |from \S+ import |@)", re.M)
_MAX_SCAN_LINES = 400  # bound on the prose fallback's quadratic search


@dataclass(frozen=True, slots=True)
class Extraction:
    code: str
    start: int  # completion[start:end] == code
    end: int


def reasoning_spans(text: str, tags: tuple[str, ...] = ("think",)) -> list[tuple[int, int]]:
    """Character spans of reasoning blocks; an unclosed block runs to the end of the text."""
    spans: list[tuple[int, int]] = []
    for tag in tags:
        pos = 0
        opener, closer = f"<{tag}>", f"</{tag}>"
        while (i := text.find(opener, pos)) != -1:
            j = text.find(closer, i + len(opener))
            end = len(text) if j == -1 else j + len(closer)
            spans.append((i, end))
            pos = end
    return sorted(spans)


def defines(code: str, name: str) -> bool:
    return re.search(rf"^\s*(async\s+)?def\s+{re.escape(name)}\s*\(", code, re.M) is not None


def blank_reasoning(text: str, tags: tuple[str, ...] = ("think",)) -> str:
    """`text` with its reasoning blocks blanked to spaces: same length, so offsets still hold."""
    out = list(text)
    for s, e in reasoning_spans(text, tags):
        out[s:e] = [c if c == "\n" else " " for c in text[s:e]]
    return "".join(out)


def extract_code(
    completion: str, entry_point: str | None = None, reasoning_tags: tuple[str, ...] = ("think",)
) -> Extraction | None:
    answer = blank_reasoning(completion, reasoning_tags)
    blocks = [
        Extraction(m.group(2), m.start(2), m.end(2))
        for m in _FENCE.finditer(answer)
        if m.group(1).lower() in _PYTHON_TAGS
    ]
    if blocks:
        if entry_point:
            with_entry = [b for b in blocks if defines(b.code, entry_point)]
            if with_entry:
                return with_entry[-1]
        return blocks[-1]
    if "```" in answer:
        return None  # a fence was opened and never closed, or only other languages were fenced
    hidden = reasoning_spans(completion, reasoning_tags)
    return _bare_code(completion, hidden[-1][1] if hidden else 0)


def _bare_code(completion: str, base: int) -> Extraction | None:
    """Without fences, only the text after the last reasoning block (from `base`) counts."""
    text = completion[base:]
    if text.strip() and parses(text):
        return Extraction(text, base, len(completion))
    starts = [m.start() for m in _CODE_START.finditer(text)][:3]  # the first few code starts
    for s in starts:
        lines = text[s:].splitlines(keepends=True)[:_MAX_SCAN_LINES]
        for n in range(len(lines), 0, -1):
            code = "".join(lines[:n])
            if parses(code):
                return Extraction(code, base + s, base + s + len(code))
    return None
