"""Output format checks and length penalties, by hand."""

from __future__ import annotations

import pytest

from execrl.rewards import CodeFenced, LengthPenalty, OneFunction, ReasoningClosed, SoftOverlong
from execrl.rewards.sample import Sample

from .conftest import TASK, sample


def chat(text: str, **kw) -> Sample:
    return Sample(TASK, text, None, **kw)


def test_code_fenced():
    assert CodeFenced()(chat("Here:\n```python\nx = 1\n```\n")).score == 1.0
    assert CodeFenced()(chat("```\nx = 1\n```")).score == 1.0
    assert CodeFenced()(chat("```python\nx = 1\n")).score == 0.0  # never closed
    assert CodeFenced(language="python")(chat("```js\nx\n```")).score == 0.0


def test_reasoning_closed():
    assert ReasoningClosed()(chat("<think>a</think>code")).score == 1.0
    assert ReasoningClosed()(chat("<think>a")).score == 0.0
    assert ReasoningClosed()(chat("</think><think>")).score == 0.0  # closed before opened
    assert ReasoningClosed()(chat("<think><think>a</think></think>")).score == 0.0  # nested
    assert ReasoningClosed()(chat("no tags")).score == 1.0
    assert ReasoningClosed(required=True)(chat("no tags")).score == 0.0


def test_one_function_with_the_entry_point_name():
    assert OneFunction()(sample("def f(x):\n    return x\n")).score == 1.0
    assert OneFunction()(sample("def g(x):\n    return x\n")).score == 0.0
    assert OneFunction()(sample("def f(x):\n    return x\ndef h():\n    pass\n")).score == 0.0
    assert OneFunction(function="g")(sample("def g(x):\n    return x\n")).score == 1.0
    assert OneFunction()(sample(None)).score == 0.0


def test_length_penalty():
    # 600 tokens, target 512: 88 over * 0.001 = 0.088 -> -0.088
    assert LengthPenalty()(sample(n_tokens=600)).score == pytest.approx(-0.088)
    assert LengthPenalty()(sample(n_tokens=100)).score == 0.0
    # chars: the completion "abcdef" is 6 chars, target 4 -> 2 * 0.5 = 1.0, capped at 0.75
    assert (
        LengthPenalty(target=4, per_unit=0.5, max_penalty=0.75, unit="chars")(chat("abcdef")).score
        == -0.75
    )
    with pytest.raises(ValueError, match="needs the completion's token count"):
        LengthPenalty()(sample())


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (700, 0.0),  # L <= L_max - L_cache = 1024 - 256 = 768
        (768, 0.0),
        (896, -0.5),  # (768 - 896) / 256 = -0.5
        (1024, -1.0),  # (768 - 1024) / 256 = -1
        (1025, -1.0),  # over L_max
    ],
)
def test_dapo_soft_overlong(n, expected):
    assert SoftOverlong()(sample(n_tokens=n)).score == pytest.approx(expected)


def test_overlong_counts_offsets_as_tokens():
    offsets = tuple((i, i + 1) for i in range(10))
    # 10 tokens, L_max 8, cache 4: over L_max -> -1; 7 tokens: (4 - 7) / 4 = -0.75
    assert SoftOverlong(max_length=8, cache=4)(sample(offsets=offsets)).score == -1.0
    assert SoftOverlong(max_length=8, cache=4)(sample(offsets=offsets[:7])).score == -0.75
