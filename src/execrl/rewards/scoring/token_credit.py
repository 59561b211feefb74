"""Token-level credit: the line of the candidate that failed, mapped to the tokens that wrote it.

The dense vector has one value per completion token: the sequence score on the last token (as a
sparse PPO reward would have it) and `-line_penalty`, spread evenly, over the tokens that overlap
the failing line. So the vector sums to `score - line_penalty` when a failure was located and to
`score` otherwise. A worked example is in docs/rewards.md.

The failing line is the `TestOutcome.line` of the first failed test that has one (the line of
the candidate that raised), or the line of a syntax error. Failures with no candidate line (an
assert of the test code, a timeout) and lines outside the completion (in the prompt prefix)
leave the credit sparse.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from execrl.rewards.sample import Sample
from execrl.sandbox import ExecutionResult, Verdict

_SYNTAX_LINE = re.compile(r"^line (\d+):")  # how sandbox/grading/grade.py words a syntax error


@dataclass(frozen=True)
class TokenCredit:
    enabled: bool = False  # compute per-token credit when offsets are given
    line_penalty: float = 0.5  # total extra penalty over the failing line's tokens


def failing_line(result: ExecutionResult) -> int | None:
    """1-based line of the program where the run failed, when the sandbox located it."""
    if result.verdict is Verdict.SYNTAX_ERROR:
        m = _SYNTAX_LINE.match(result.message)
        if m:
            return int(m.group(1))
    for t in sorted(result.tests, key=lambda t: t.index):
        if t.verdict is not Verdict.PASSED and t.line is not None:
            return t.line
    return None


def line_span(text: str, line: int) -> tuple[int, int] | None:
    """[start, end) characters of 1-based `line` of `text`, without its newline."""
    if line < 1:
        return None
    start = 0
    for _ in range(line - 1):
        nl = text.find("\n", start)
        if nl == -1:
            return None
        start = nl + 1
    end = text.find("\n", start)
    return (start, len(text) if end == -1 else end)


def completion_span(sample: Sample, line: int) -> tuple[int, int] | None:
    """The failing line's characters in the completion; None when it is not model text."""
    if sample.program is None or sample.code_span is None:
        return None
    span = line_span(sample.program, line)
    if span is None:
        return None
    p = len(sample.prefix)
    start, end = max(span[0], p) - p, span[1] - p
    code_len = sample.code_span[1] - sample.code_span[0]
    end = min(end, code_len)
    if end <= start:
        return None
    return (sample.code_span[0] + start, sample.code_span[0] + end)


def span_tokens(offsets: tuple[tuple[int, int], ...], span: tuple[int, int]) -> list[int]:
    """Indices of tokens overlapping `span`; zero-width tokens (specials) never do."""
    s, e = span
    return [i for i, (a, b) in enumerate(offsets) if a < b and a < e and s < b]


def dense_credit(
    score: float,
    offsets: tuple[tuple[int, int], ...],
    span: tuple[int, int] | None,
    line_penalty: float,
) -> tuple[float, ...]:
    credit = [0.0] * len(offsets)
    if not credit:
        return ()
    credit[-1] = score
    tokens = span_tokens(offsets, span) if span is not None else []
    for i in tokens:
        credit[i] -= line_penalty / len(tokens)
    return tuple(credit)


def token_credit(sample: Sample, score: float, config: TokenCredit) -> tuple[float, ...] | None:
    if sample.offsets is None:
        return None
    span = None
    if sample.result is not None and not sample.result.passed:
        line = failing_line(sample.result)
        span = completion_span(sample, line) if line is not None else None
    return dense_credit(score, sample.offsets, span, config.line_penalty)
