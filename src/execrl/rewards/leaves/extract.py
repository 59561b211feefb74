"""Code extraction from model output: fences with or without a language tag, prose around the
code, reasoning blocks, several blocks.

Rules, in order: code inside reasoning blocks (`<think>...</think>`, or an unclosed `<think>` to
the end) never counts. Among complete fenced blocks tagged with the task's language
(`tasks.languages.FENCE_TAGS`: ```python for Python, ```sql for SQL, ```cpp for C++...) or
untagged, take the last one that defines the entry point, else the last one. With no complete
fence, a Python answer is the text itself when it parses, else the longest stretch that starts
at a `def`/`class`/`import` line and parses. Otherwise there is no code: a truncated fence is not
a program, and a block in another language than the task's is not its answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from execrl.rewards.leaves.syntax import parses
from execrl.tasks.languages import FENCE_CLOSING, FENCE_OPENING, fence_tags

# What a fenced block is, as one regex: `fences` finds exactly its matches, in linear time (this
# regex's lazy body rescans to the end from every unclosed opening line: 10,000 lines of
# "```python" took 95 s; tests/rewards/test_hostile_source.py pins the two together).
_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+#.-]*)[^\n]*\n(.*?)^[ \t]*```[ \t]*$", re.M | re.S)
_CODE_START = re.compile(r"^(def |async def |class |import |from \S+ import |@)", re.M)
_MAX_SCAN_LINES = 400  # bound on the prose fallback's quadratic search


@dataclass(frozen=True, slots=True)
class Extraction:
    code: str
    start: int  # completion[start:end] == code
    end: int


@dataclass(frozen=True, slots=True)
class Fence:
    tag: str  # the word after the opening ```, as written ("" when none)
    start: int  # text[start:end] is the block's body, up to the closing fence's line
    end: int


def fences(text: str) -> list[Fence]:
    """The complete fenced blocks of `text`, as `_FENCE.finditer` finds them, in linear time: an
    opening line ([blanks]```tag...) is closed by the next line that is only [blanks]```[blanks]
    (a block closes at the first such line; an opening line with none after it opens nothing)."""
    lines = text.split("\n")
    starts = [0] * len(lines)
    for n in range(1, len(lines)):
        starts[n] = starts[n - 1] + len(lines[n - 1]) + 1
    next_closing = [len(lines)] * (len(lines) + 1)  # the first closing line at or after n
    for n in range(len(lines) - 1, -1, -1):
        closes = FENCE_CLOSING.fullmatch(lines[n]) is not None
        next_closing[n] = n if closes else next_closing[n + 1]
    found: list[Fence] = []
    n = 0
    while n < len(lines) - 1:  # an opening line ends with a newline: never the last piece
        opening = FENCE_OPENING.match(lines[n])
        close = next_closing[n + 1]
        if opening is None or close == len(lines):
            n += 1
            continue
        found.append(Fence(opening.group(1), starts[n + 1], starts[close]))
        n = close + 1
    return found


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
    # [^\S\n]*, not \s*: from every line start \s* ran over all the blank lines below it and
    # back (32,000 newlines took 18 s); a def after blank lines is found from its own line start.
    pattern = rf"^[^\S\n]*(async\s+)?def\s+{re.escape(name)}\s*\("
    return re.search(pattern, code, re.M) is not None


def blank_reasoning(text: str, tags: tuple[str, ...] = ("think",)) -> str:
    """`text` with its reasoning blocks blanked to spaces: same length, so offsets still hold."""
    out = list(text)
    for s, e in reasoning_spans(text, tags):
        out[s:e] = [c if c == "\n" else " " for c in text[s:e]]
    return "".join(out)


def extract_code(
    completion: str,
    entry_point: str | None = None,
    reasoning_tags: tuple[str, ...] = ("think",),
    language: str = "python",
) -> Extraction | None:
    answer = blank_reasoning(completion, reasoning_tags)
    tags = fence_tags(language)
    blocks = [
        Extraction(answer[f.start : f.end], f.start, f.end)
        for f in fences(answer)
        if f.tag.lower() in tags
    ]
    if blocks:
        if entry_point:
            with_entry = [b for b in blocks if defines(b.code, entry_point)]
            if with_entry:
                return with_entry[-1]
        return blocks[-1]
    if "```" in answer or "python" not in tags:
        # a fence opened and never closed, or only other languages fenced; the prose fallback
        # reads Python only
        return None
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
