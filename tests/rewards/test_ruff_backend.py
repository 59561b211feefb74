"""The ruff backend of the static, style and security leaves: hand-computed components, one
ruff call per batch with the same results as one program at a time, and failures that are errors
(a missing or failing ruff), never a zero."""

from __future__ import annotations

import json
import subprocess

import pytest

from execrl.rewards import RewardConfig, RewardConfigError, RewardScorer, build_reward
from execrl.rewards.analysis import ruff_backend as rb
from execrl.rewards.analysis.analysis import AnalysisError, analyse, analyse_many
from execrl.rewards.leaves.security import Security
from execrl.rewards.leaves.static_analysis import StaticAnalysis
from execrl.rewards.leaves.style import Style
from execrl.rewards.scoring.analyser import Analyser, analyses_of

from .conftest import TASK, sample

STATIC = (
    "import os\n"  # F401 unused import: 0.1
    "def f(x):\n"
    "    y = 2\n"  # F841 unused variable: 0.1
    "    return z\n"  # F821 undefined name: 0.5
    "    print(x)\n"  # unreachable after return (AST count): 0.2
)
STYLE = "def f(x):\n  y=1\n  return x + y\n"  # E111 twice (2-space indents), E225 once (y=1)
SECURITY = (
    "import subprocess\n"  # S404, bandit B404: LOW 0.1
    "\n\n"
    "def f(x):\n"
    "    subprocess.call(x, shell=True)\n"  # S602, B602 with a variable command: HIGH 0.6
    "    return eval(x)\n"  # S307, B307: MEDIUM 0.3
)


def test_static_ruff_hand_computed():
    findings = analyse(STATIC, (rb.ruff_analysis(),))[0]
    assert rb.static_counts(findings) == {"undefined": 1, "unused": 2, "unreachable": 1}
    # 0.5 + 0.1 + 0.1 + 0.2 = 0.9, as the pyflakes backend gives (test_static.py)
    ruff = StaticAnalysis(backend="ruff")
    assert ruff(sample(STATIC)).score == pytest.approx(-0.9)
    assert StaticAnalysis()(sample(STATIC)).score == pytest.approx(-0.9)
    assert ruff(sample("def f(x):\n    return x\n")).score == 0.0
    assert ruff(sample("def f(:\n")).score == -1.0  # does not parse: -max_penalty
    assert ruff(sample(None)).score == -1.0
    # a duplicate parameter parses but cannot compile: ruff's syntax error and pyflakes's
    # DuplicateArgument are both "other", 0.1
    dup = "def f(x, x):\n    return x\n"
    assert ruff(sample(dup)).score == pytest.approx(-0.1)
    assert StaticAnalysis()(sample(dup)).score == pytest.approx(-0.1)


def test_style_ruff_hand_computed():
    # 3 violations x 0.05 = 0.15, as pycodestyle counts them
    assert Style(backend="ruff")(sample(STYLE)).score == pytest.approx(-0.15)
    assert Style()(sample(STYLE)).score == pytest.approx(-0.15)
    assert Style(backend="ruff", ignore=("E111", "E225"))(sample(STYLE)).score == 0.0
    assert Style(backend="ruff", ignore=("E1",))(sample(STYLE)).score == pytest.approx(-0.05)
    # E226 (no spaces around *) is in pycodestyle's default ignore list: not counted by default
    tight = "def f(x):\n    return x*2\n"
    assert Style(backend="ruff")(sample(tight)).score == 0.0
    assert Style(backend="ruff", ignore=("W",))(sample(tight)).score == pytest.approx(-0.05)
    # E501 at the leaf's line length: a 92-character line is too long at 90, not at 100
    long = "def f(x):\n    return " + "x + " * 20 + "x\n"
    assert len(long.splitlines()[1]) == 92
    assert Style(backend="ruff", max_line_length=90)(sample(long)).score == pytest.approx(-0.05)
    assert Style(backend="ruff")(sample(long)).score == 0.0


def test_security_ruff_hand_computed():
    findings = analyse(SECURITY, (rb.ruff_analysis(),))[0]
    assert findings.security == (("HIGH", "S602"), ("LOW", "S404"), ("MEDIUM", "S307"))
    # 0.1 + 0.6 + 0.3 = 1.0 (max_penalty 2.0: no cap), as bandit gives
    assert Security(backend="ruff", max_penalty=2.0)(sample(SECURITY)).score == pytest.approx(-1.0)
    assert Security(max_penalty=2.0)(sample(SECURITY)).score == pytest.approx(-1.0)
    no_high = Security(backend="ruff", severity={"HIGH": 0.0})
    assert no_high(sample(SECURITY)).score == pytest.approx(-0.4)
    # a literal command "seems safe": bandit's B602 LOW; plus S607 (partial path "ls"), LOW
    literal = "import subprocess\n\n\ndef f():\n    subprocess.call('ls', shell=True)\n"
    lit = analyse(literal, (rb.ruff_analysis(),))[0]
    assert lit.security == (("LOW", "S404"), ("LOW", "S602"), ("LOW", "S607"))
    assert Security(backend="ruff")(sample(literal)).score == pytest.approx(-0.3)
    assert Security(backend="ruff")(sample("def f(x):\n    return x + 1\n")).score == 0.0


def test_noqa_comments_do_not_silence_ruff():
    program = "import os  # noqa\nimport sys  # noqa: F401\n# ruff: noqa\n"
    # two unused imports, 0.1 each, whatever the comments say
    assert StaticAnalysis(backend="ruff")(sample(program)).score == pytest.approx(-0.2)


def test_every_ruff_security_rule_has_a_severity():
    done = subprocess.run(
        [rb.ruff_bin(), "rule", "--all", "--output-format", "json"],
        capture_output=True,
        check=True,
    )
    rules = json.loads(done.stdout)
    s_codes = {r["code"] for r in rules if r["linter"] == "flake8-bandit"}
    assert s_codes and s_codes <= set(rb.SEVERITY)
    codes = {r["code"] for r in rules}
    assert set(rb.STATIC_CATEGORIES) <= codes


PROGRAMS = [
    STATIC,
    STYLE,
    SECURITY,
    "def f(x):\n    return x + 1\n",
    "def f(:\n",  # does not parse: None
    "import os  # noqa\n",
    "def f(x, x):\n    return x\n",
]


def test_a_batch_gives_the_results_of_one_program_at_a_time():
    analysis = rb.ruff_analysis()
    one_by_one = [analyse(p, (analysis,)) for p in PROGRAMS]
    assert analyse_many(PROGRAMS, (analysis,)) == one_by_one
    assert one_by_one[4] == (None,)
    assert sum(r[0].codes.count("F401") for r in one_by_one if r[0] is not None) == 2


RUFF_TREE = {
    "type": "sum",
    "terms": [
        {"weight": 1.0, "type": "pass_fraction"},
        {"weight": 0.5, "type": "static", "backend": "ruff"},
        {"weight": 0.1, "type": "style", "backend": "ruff"},
        {"weight": 0.2, "type": "security", "backend": "ruff"},
    ],
}
FENCE = "```python\n{}```"


def test_the_scorer_runs_one_shared_ruff_analysis_with_the_serial_results(sandbox):
    completions = [FENCE.format(p) for p in PROGRAMS] + [FENCE.format(STATIC), "no code"]
    tasks = [TASK] * len(completions)
    reward = build_reward(RUFF_TREE)
    assert analyses_of(reward) == (rb.ruff_analysis(),)  # three leaves, one ruff call per chunk
    config = RewardConfig.from_dict({"tree": RUFF_TREE, "analysis_workers": 1})
    with RewardScorer(config, sandbox=sandbox) as scorer:
        parallel = scorer.score(tasks, completions)
        assert scorer._analyser is not None and scorer._analyser.started
        executed = scorer.execute(scorer.samples(tasks, completions))
        serial = [scorer.score_sample(s) for s in executed]  # each leaf runs ruff itself
    in_process = RewardScorer(
        RewardConfig.from_dict({"tree": RUFF_TREE, "analysis_workers": 0}), sandbox=sandbox
    ).score(tasks, completions)
    assert parallel == serial == in_process
    assert parallel[0].components["static"] == pytest.approx(-0.9)
    assert parallel[1].components["style"] == pytest.approx(-0.15)
    assert parallel[4].components["static"] == -1.0  # does not parse


def test_leaves_share_the_ruff_call_only_at_the_same_line_length():
    tree = {**RUFF_TREE, "terms": [*RUFF_TREE["terms"][1:3]]}
    assert len(analyses_of(build_reward(tree))) == 1
    tree["terms"][1] = {**tree["terms"][1], "max_line_length": 80}
    assert len(analyses_of(build_reward(tree))) == 2


def test_an_analyser_sends_a_batched_analysis_one_piece_per_worker():
    analyser = Analyser((rb.ruff_analysis(),), workers=2, piece=1)
    assert analyser.batched
    samples = [sample(f"def f(x):\n    return x + {i}\n") for i in range(5)]
    try:
        pending = analyser.submit(samples)
        assert len({future for future, _ in pending.futures.values()}) == 2  # not 5
        out = analyser.attach(pending, samples)
    finally:
        analyser.close()
    assert [next(iter(s.analyses.values())).codes for s in out] == [()] * 5


def test_unknown_backends_are_config_errors():
    for kind, bad in (("static", "flake8"), ("style", "pyflakes"), ("security", "semgrep")):
        with pytest.raises(RewardConfigError, match=rf"reward.tree: {kind} backend: '{bad}'"):
            build_reward({"type": kind, "backend": bad})
    with pytest.raises(RewardConfigError, match="ruff accepts 1 to 320"):
        build_reward({"type": "style", "backend": "ruff", "max_line_length": 400})


@pytest.fixture
def no_ruff_cache():
    clear = rb.ruff_bin.cache_clear  # the cached lookup, whatever a test patches in its place
    clear()
    yield
    clear()


def test_a_missing_ruff_is_an_error_that_says_what_to_do(monkeypatch, no_ruff_cache):
    import ruff

    def not_found() -> str:
        raise FileNotFoundError("no ruff binary")

    monkeypatch.setattr(ruff, "find_ruff_bin", not_found)
    monkeypatch.setattr(rb.shutil, "which", lambda name: None)
    for leaf in (StaticAnalysis(backend="ruff"), Style(backend="ruff"), Security(backend="ruff")):
        with pytest.raises(AnalysisError, match=r"task inc: .*pip install 'execrl\[rewards\]'"):
            leaf(sample("def f(x):\n    return x\n"))


@pytest.mark.parametrize(
    ("script", "message"),
    [
        (
            "echo 'error: something broke' >&2; exit 2",
            r"exit status 2 on \d programs?: error: something broke",
        ),
        ("echo 'not json'", "printed no JSON list"),
    ],
)
def test_a_failing_ruff_is_an_error_not_a_zero(
    script, message, tmp_path, monkeypatch, no_ruff_cache
):
    fake = tmp_path / "ruff"
    fake.write_text(f"#!/bin/sh\n{script}\n")
    fake.chmod(0o755)
    monkeypatch.setattr(rb, "ruff_bin", lambda: str(fake))
    with pytest.raises(AnalysisError, match=f"task inc: the ruff analysis failed.*{message}"):
        StaticAnalysis(backend="ruff")(sample("def f(x):\n    return x\n"))
    # through the analyser: one call for the batch, and every program of it fails
    leaf = StaticAnalysis(backend="ruff")
    analyser = Analyser((leaf.analysis,), workers=0)
    samples = [sample("x = 1\n"), sample("y = 2\n")]
    for s in analyser.attach(analyser.submit(samples), samples):
        with pytest.raises(AnalysisError, match=message):
            leaf(s)
