"""Static, style and security analyses run ahead in worker processes: same results as the
serial path, cached by program, and failures that name the task instead of scoring zero."""

from __future__ import annotations

import warnings

import pytest

from execrl.rewards import RewardConfig, RewardConfigError, RewardScorer, build_reward
from execrl.rewards.analysis.analysis import Analysis, AnalysisError
from execrl.rewards.leaves.security import bandit_findings
from execrl.rewards.leaves.static_analysis import PYFLAKES
from execrl.rewards.scoring.analyser import Analyser, analyses_of
from rewards.analysis_helpers import (
    CALLS,
    ProbeLeaf,
    counting,
    crash_always,
    raise_on_marker,
)

from .conftest import TASK, sample

FENCE = "```python\n{}```"
GOOD = FENCE.format("def f(x):\n    return x + 1\n")
STATIC = FENCE.format("import os\ndef f(x):\n    y = 2\n    return z\n    print(x)\n")
COMPLETIONS = [
    GOOD,
    GOOD,  # a GRPO group's duplicate: analysed once
    FENCE.format("def f(x):\n  y=1\n  return x + y\n"),  # passes; E111 twice, E225 once
    STATIC,
    FENCE.format(
        "import subprocess\n\n\ndef f(x):\n    if x == 'rm':\n"
        "        subprocess.call(x, shell=True)\n    return eval(str(x)) + 1\n"
    ),
    FENCE.format("def f(x:\n"),  # does not parse
    "I do not know.",  # no code
    STATIC,
]
TREE = {
    "type": "sum",
    "name": "total",
    "terms": [
        {"weight": 1.0, "type": "pass_fraction"},
        {"weight": 0.5, "type": "static"},
        {"weight": 0.1, "type": "style"},
        {"weight": 0.2, "type": "security"},
        {
            "weight": 0.1,
            "reward": {
                "type": "gate",
                "condition": {"type": "pass"},
                "reward": {"type": "style", "name": "gated_style", "per_violation": 0.1},
            },
        },
    ],
}


def test_parallel_analyses_give_exactly_the_serial_results(sandbox):
    config = RewardConfig.from_dict({"tree": TREE, "analysis_workers": 1})
    tasks = [TASK] * len(COMPLETIONS)
    with RewardScorer(config, sandbox=sandbox) as scorer:
        parallel = scorer.score(tasks, COMPLETIONS)
        analyser = scorer._analyser
        assert analyser is not None and analyser.started  # ran in a worker process
        # the two style leaves share one analysis; 5 distinct programs, the duplicates cached
        assert len(analyser.analyses) == 3 and len(analyser._cache) == 5
        # the serial path: each leaf runs its own analysis on un-annotated samples
        executed = scorer.execute(scorer.samples(tasks, COMPLETIONS))
        assert all(s.analyses is None for s in executed)
        serial = [scorer.score_sample(s) for s in executed]
    in_process = RewardScorer(
        RewardConfig.from_dict({"tree": TREE, "analysis_workers": 0}), sandbox=sandbox
    ).score(tasks, COMPLETIONS)
    assert parallel == serial == in_process
    # and they are not trivially equal: hand-computed components (see test_static.py)
    assert parallel[3].components["static"] == pytest.approx(-0.9)
    assert parallel[2].components["style"] == pytest.approx(-0.15)  # 3 violations x 0.05
    assert parallel[2].components["gated_style"] == pytest.approx(-0.3)
    assert parallel[4].components["security"] < 0
    assert parallel[5].components["static"] == -1.0  # does not parse: -max_penalty


def test_a_crashed_analysis_worker_is_an_error_not_a_zero(sandbox):
    """A worker that dies on every program, a control program too, is the pool's failure. (A
    program that kills a worker alone is its own: tests/rewards/test_hostile_source.py.)"""
    reward = ProbeLeaf(Analysis("crashy", crash_always))
    scorer = RewardScorer(RewardConfig(), sandbox=sandbox, reward=reward)
    with pytest.raises(
        AnalysisError, match=r"worker process died \(exit code 3\).*tasks \['inc'\]"
    ):
        scorer.score([TASK, TASK], [GOOD, STATIC])
    scorer.close()


def test_an_analysis_that_cannot_reach_a_worker_says_why(sandbox):
    reward = ProbeLeaf(Analysis("inline", lambda program, tree: 0))
    with RewardScorer(RewardConfig(), sandbox=sandbox, reward=reward) as scorer:
        with pytest.raises(AnalysisError, match="must be defined at module level"):
            scorer.score([TASK], [GOOD])


@pytest.mark.parametrize("workers", [0, 1])
def test_an_analysis_that_raises_names_the_task(sandbox, workers):
    reward = ProbeLeaf(Analysis("boom", raise_on_marker))
    config = RewardConfig(analysis_workers=workers)
    with RewardScorer(config, sandbox=sandbox, reward=reward) as scorer:
        boom = FENCE.format("def f(x):\n    return x + 1\nBOOM = 1\n")
        expected = "task inc: the boom analysis failed on this program: ValueError: boom on purpose"
        with pytest.raises(AnalysisError, match=expected):
            scorer.score([TASK, TASK], [GOOD, boom])
    with pytest.raises(AnalysisError, match=expected):  # the leaf alone says the same
        reward(sample("def f(x):\n    return x + 1\nBOOM = 1\n"))


def test_identical_programs_are_analysed_once_and_the_cache_is_bounded():
    CALLS.clear()
    probe = Analysis("count", counting)
    one, two = "def f(x):\n    return x\n", "def g():\n    pass\n"
    batch = [sample(one), sample(one), sample(two), sample(None), sample("def f(:\n"), sample(one)]
    analyser = Analyser((probe,), workers=0, cache_size=2)
    out = analyser.attach(analyser.submit(batch), batch)
    # two distinct programs that parse, once each; the one that does not parse is never analysed
    assert CALLS == [one, two]
    assert out[0].analyses == {probe: len(one)} and out[2].analyses == {probe: len(two)}
    assert out[3].analyses is None and out[4].analyses == {probe: None}
    analyser.attach(analyser.submit(batch[:1]), batch[:1])  # the next step: a cache hit
    assert CALLS == [one, two]
    analyser.attach(analyser.submit([sample("x = 1\n")]), [sample("x = 1\n")])
    assert len(analyser._cache) == 2  # the least recently used program was evicted


def test_analyses_of_a_tree_are_found_and_shared():
    tree = build_reward(
        {
            "type": "sum",
            "terms": [
                {"type": "static"},
                {"type": "static", "name": "heavy", "weights": {"undefined": 2.0}},
                {"type": "pass"},
                {
                    "reward": {
                        "type": "gate",
                        "condition": {"type": "pass"},
                        "reward": {"type": "style"},
                    }
                },
            ],
        }
    )
    found = analyses_of(tree)
    assert [a.name for a in found] == ["pyflakes", "pycodestyle"] and found[0] == PYFLAKES
    assert analyses_of(build_reward({"type": "pass"})) == ()


def test_analysis_workers_is_checked():
    with pytest.raises(RewardConfigError, match="analysis_workers"):
        RewardConfig.from_dict({"analysis_workers": -1})


def _bandit_file_scan(program: str, tmp_path) -> list[tuple[str, str]]:
    """bandit's own, public way: a manager per run, scanning a file (as `bandit --ignore-nosec`:
    the reward ignores a program's `# nosec` comments)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from bandit.core import config, manager

        mgr = manager.BanditManager(config.BanditConfig(), "file", quiet=True, ignore_nosec=True)
    path = tmp_path / "candidate.py"
    path.write_text(program, encoding="utf-8")
    mgr.discover_files([str(path)])
    mgr.run_tests()
    return [(str(i.severity), str(i.test_id)) for i in mgr.get_issue_list()]


@pytest.mark.parametrize(
    "program",
    [
        "import subprocess\ndef f(x):\n    subprocess.call(x, shell=True)\n    return eval(x)\n",
        "import subprocess  # nosec\nimport pickle\ndef f(b):\n    return pickle.loads(b)\n",
        "password = 'hunter2'\nassert password\n",
        "import hashlib\ndef h(s):\n    return hashlib.md5(s).hexdigest()\n",
        "def f(x):\n    return x + 1\n",
    ],
)
def test_bandit_in_memory_scan_matches_bandit_file_scan(program, tmp_path):
    expected = _bandit_file_scan(program, tmp_path)
    assert bandit_findings(program) == expected
    assert bandit_findings(program) == expected  # nothing carried over from the last scan
