"""The reward path survives hostile source: every execution-free analysis returns a finite
score on any completion (or raises only for its own failure, never for the program's), and one
bad completion never aborts a scoring step."""

from __future__ import annotations

import math
import time

import pytest

from execrl.rewards import (
    RewardConfig,
    RewardScorer,
    Security,
    StaticAnalysis,
    Style,
    SyntaxValid,
)
from execrl.rewards.analysis import analysis_worker
from execrl.rewards.analysis.analysis import MAX_PROGRAM_CHARS, Analysis
from execrl.rewards.analysis.hardcode import hardcoded_tests
from execrl.rewards.leaves.format import CodeFenced, OneFunction, ReasoningClosed
from execrl.tasks import CallTests, Task
from rewards.analysis_helpers import ProbeLeaf, crash_on_marker, hang_on_marker

from .conftest import TASK, sample
from .test_analysis_pool import TREE  # pass fraction, static, style, security, a gated style

DEF = "def f(x):\n    return "
HOSTILE = {
    # 5,000 terms: a left-nested BinOp past the recursion limit while building the AST
    "sum-of-5000-terms": DEF + "+".join(["x"] * 5000) + "\n",
    "attribute-chain-of-5000": DEF + "x" + ".a" * 5000 + "\n",
    "type-compare-chain": DEF + "type(x) == type(" + "a." * 20000 + "b)\n",
    "blocks-nested-90-deep": "def f(x):\n"
    + "".join("    " * (i + 1) + "if x:\n" for i in range(90))
    + "    " * 91
    + "return 1\n",
    "lambdas-nested-500-deep": "f = " + "lambda: " * 500 + "1\n",
    "list-nested-190-deep": "x = " + "[" * 190 + "]" * 190 + "\ndef f(x):\n    return x\n",
    "huge-hex-literals": "def f(x):\n    if x == 0x"
    + "f" * 5000
    + ":\n        return 0x"
    + "e" * 5000
    + "\n",
    "huge-decimal-literal": DEF + "9" * 5000 + "\n",
    "huge-string-literal": DEF + "'" + "a" * 1_000_000 + "'\n",
    # pycodestyle's E711 regex took 254 s on this line (quadratic in the run of spaces)
    "regex-backtracking-line": "f = lambda" + " " * 100_000 + ": 1\n",
    "long-program": "x = 1\n" * (MAX_PROGRAM_CHARS // 6 + 1) + "def f(x):\n    return x\n",
    "nul-byte": DEF + "x\x00\n",
    "blank-runs-in-one-statement": "x = (\n" + ("    a" + " " * 1990 + "b,\n") * 20 + ")\n",
}
LEAVES = [
    StaticAnalysis(),
    StaticAnalysis(backend="ruff"),
    Style(),
    Style(backend="ruff"),
    Security(),
    Security(backend="ruff"),
    SyntaxValid(),
    OneFunction(),
    CodeFenced(),
    ReasoningClosed(),
]
# The visible test's values are huge too: the hard-code check compares literals with them.
HUGE_VISIBLE = Task(
    id="huge",
    prompt="",
    tests=CallTests(inputs=((1,),), expected=(2,)),
    entry_point="f",
    visible_tests=CallTests(inputs=((16**5000 - 1,),), expected=(int("e" * 5000, 16),)),
)


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_every_analysis_gives_a_finite_score_on_hostile_source(name):
    program = HOSTILE[name]
    for reward in LEAVES:
        started = time.monotonic()
        result = reward(sample(program))
        low, high = reward.bounds
        assert math.isfinite(result.score) and low <= result.score <= high, (reward, result)
        assert time.monotonic() - started < 30, (reward, "took", time.monotonic() - started)
    hits, n = hardcoded_tests(program, HUGE_VISIBLE)
    assert 0 <= hits <= n == 1


def test_a_program_the_analysers_cannot_handle_gets_the_full_penalty_with_the_reason():
    for reward in (StaticAnalysis(), Style(), Security()):
        result = reward(sample(HOSTILE["sum-of-5000-terms"]))  # CPython cannot compile it either
        assert result.score == -reward.max_penalty
    result = Style()(sample(HOSTILE["regex-backtracking-line"]))
    assert result.score == -1.0 and "a line of 100014 characters" in result.reason
    assert SyntaxValid()(sample(HOSTILE["sum-of-5000-terms"])).score == 0.0


def test_the_hardcode_check_still_sees_huge_literals():
    program = HOSTILE["huge-hex-literals"]  # returns the visible expected value on its input
    assert hardcoded_tests(program, HUGE_VISIBLE) == (1, 1)


@pytest.mark.parametrize("workers", [0, 1])
def test_one_bad_completion_never_aborts_a_scoring_step(sandbox, workers):
    config = RewardConfig.from_dict({"tree": TREE, "analysis_workers": workers})
    good = "```python\ndef f(x):\n    return x + 1\n```"
    bad = [f"```python\n{HOSTILE[name]}```" for name in sorted(HOSTILE) if name != "long-program"]
    with RewardScorer(config, sandbox=sandbox) as scorer:
        alone = scorer.score([TASK], [good])[0]
        results = scorer.score([TASK] * (len(bad) + 1), [*bad, good])
    assert results[-1] == alone and alone.score == pytest.approx(1.0)
    assert all(math.isfinite(r.score) and not r.masked for r in results)


@pytest.mark.parametrize(
    "marker, analysis",
    [("CRASH", Analysis("crashy", crash_on_marker)), ("HANG", Analysis("hangs", hang_on_marker))],
)
def test_a_program_that_kills_or_stalls_an_analysis_worker_costs_only_its_own_score(
    sandbox, monkeypatch, marker, analysis
):
    monkeypatch.setattr(analysis_worker, "answer_s", lambda n: 3.0)  # a hang is noticed in 3 s
    good = "```python\ndef f(x):\n    return x + 1\n```"
    bad = f"```python\ndef f(x):\n    return x + 1\n{marker} = 1\n```"
    with RewardScorer(RewardConfig(), sandbox=sandbox, reward=ProbeLeaf(analysis)) as scorer:
        results = scorer.score([TASK] * 3, [good, bad, good])
        assert [r.score for r in results] == [0.0, -1.0, 0.0]
        assert "failed on this program alone" in results[1].reason
        assert scorer.score([TASK], [good])[0].score == 0.0  # new workers serve what follows


def test_a_program_ruff_fails_on_fails_alone_not_its_whole_batch(tmp_path, monkeypatch):
    """A ruff that exits with an error on one program (as a crash of ruff's would) fails that
    program, as its fault; the batch's other programs keep their results."""
    from execrl.rewards.analysis import ruff_backend
    from execrl.rewards.scoring.analyser import Analyser

    real = ruff_backend.ruff_bin()
    fake = tmp_path / "ruff"
    fake.write_text(
        '#!/bin/sh\nfor f in "$@"; do case "$f" in *.py) if grep -q POISON "$f"; then\n'
        '  echo "error: ruff crashed" >&2; exit 2; fi;; esac; done\n'
        f'exec "{real}" "$@"\n'
    )
    fake.chmod(0o755)
    monkeypatch.setattr(ruff_backend, "ruff_bin", lambda: str(fake))
    leaf = StaticAnalysis(backend="ruff")
    analyser = Analyser((leaf.analysis,), workers=0)
    samples = [
        sample("import os\ndef f(x):\n    return x + 1\n"),
        sample("def f(x):\n    return x + 1\nPOISON = 1\n"),
    ]
    scored = [leaf(s) for s in analyser.attach(analyser.submit(samples), samples)]
    assert [r.score for r in scored] == [-0.1, -1.0]  # an unused import; the poisoned one
    assert "ruff crashed" in scored[1].reason


def test_fences_are_found_in_linear_time_exactly_as_the_regex_defines_them():
    import random

    from execrl.rewards.leaves.extract import _FENCE, extract_code, fences

    rng = random.Random(0)
    pieces = ["```", "```python", "``` py", "````", "  ```  ", "\t```", "x", "```x y", "", " ",
              "def f(x):", "    return x", "```\t", "\r", "```é", "```c++"]  # fmt: skip
    for _ in range(3000):
        text = "\n".join(rng.choice(pieces) for _ in range(rng.randint(0, 9)))
        text += "\n" if rng.random() < 0.5 else ""
        want = [(m.group(1), m.start(2), m.end(2)) for m in _FENCE.finditer(text)]
        assert [(f.tag, f.start, f.end) for f in fences(text)] == want, text
    # the regex rescans to the end from each unclosed opening line: 10,000 such lines took 95 s
    hostile = "```python\n" * 50_000
    started = time.monotonic()
    assert extract_code(hostile, "f") is None
    assert CodeFenced()(sample(hostile)).score == 0.0  # Sample.of: the completion is the program
    assert time.monotonic() - started < 5


def test_finding_the_entry_point_is_linear_in_blank_lines():
    from execrl.rewards.leaves.extract import defines, extract_code

    blank = "\n" * 200_000  # from each line start, ^\s* ran over every blank line below it
    started = time.monotonic()
    assert not defines(blank, "f") and extract_code(f"```python\n{blank}```\n", "f") is not None
    assert time.monotonic() - started < 5
    assert defines("x = 1\n\n\n  \n    def f(x):\n", "f")  # after blank lines, indented
    assert defines("async  def f (", "f") and not defines("# def f(", "f")
