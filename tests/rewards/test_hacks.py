"""Hack detection: every attack gets the minimum reward and its flag; the AST check; the monitor."""

from __future__ import annotations

import pytest

from execrl.rewards import HackPolicy, RewardConfig, RewardMonitor, RewardScorer
from execrl.rewards.analysis.hardcode import hardcoded_tests, hardcodes_visible
from execrl.rewards.result import Flag
from execrl.tasks import AssertTests, CallTests, StdioCase, StdioTests, Task

from .conftest import TASK

CALL_TASK = Task(
    id="inc-call",
    prompt="",
    tests=CallTests(inputs=((1,), (2,), (10,)), expected=(2, 3, 11)),
    entry_point="f",
    visible_tests=CallTests(inputs=((10,),), expected=(11,)),
)

# One program per attack class, as the sandbox's adversarial tests try them.
ATTACKS = {
    "exit at import": ("import os\nos._exit(0)\n", Flag.EARLY_EXIT),
    "exit in the entry point": ("import os\ndef f(x):\n    os._exit(0)\n", Flag.EARLY_EXIT),
    "sys.exit during tests": ("import sys\ndef f(x):\n    sys.exit(0)\n", Flag.EARLY_EXIT),
    "trace hook": (
        "import sys\nsys.settrace(lambda *a: None)\ndef f(x):\n    return x + 1\n",
        Flag.TAMPERING,
    ),
    "frame walk": (  # a frame read from a traceback: sys._getframe alone is FRAME_REFUSED
        "import sys\ndef f(x):\n    try:\n        1 / 0\n    except ZeroDivisionError as e:\n"
        "        e.__traceback__.tb_frame\n    return x + 1\n",
        Flag.TAMPERING,
    ),
    "gc scan": ("import gc\ndef f(x):\n    gc.get_objects()\n    return x + 1\n", Flag.TAMPERING),
    "always-equal object": (
        "class A:\n    def __eq__(self, o):\n        return True\ndef f(x):\n    return A()\n",
        Flag.NOT_PLAIN_DATA,
    ),
    "int subclass": (
        "class I(int):\n    def __eq__(self, o):\n        return True\ndef f(x):\n    return I(0)\n",
        Flag.NOT_PLAIN_DATA,
    ),
    "hard-coded visible test": (
        "def f(x):\n    if x == 10:\n        return 11\n    return 0\n",
        Flag.HARDCODED_VISIBLE,
    ),
}


@pytest.mark.parametrize("task", [TASK, CALL_TASK], ids=["assert", "call"])
def test_every_attack_gets_the_minimum_and_its_flag(sandbox, task):
    # CodeRL credit: minimum -1.0; a crash alone would give -0.6 and a wrong answer -0.3
    scorer = RewardScorer(RewardConfig(tree={"type": "verdict_credit"}), sandbox=sandbox)
    names = list(ATTACKS)
    fenced = [f"```python\n{ATTACKS[n][0]}```" for n in names]
    results = scorer.score([task] * len(names), fenced)
    for name, r in zip(names, results, strict=True):
        assert r.score == -1.0, name
        assert ATTACKS[name][1] in r.flags, (name, r.flags)
        assert not r.masked and "penalised" in r.reason
    metrics = scorer.last_metrics
    assert metrics["reward/flag/tampering"] == 3.0
    assert metrics["reward/flag/early_exit"] == 3.0


def test_honest_programs_are_not_flagged(sandbox):
    scorer = RewardScorer(RewardConfig(tree={"type": "verdict_credit"}), sandbox=sandbox)
    honest = [
        "def f(x):\n    return x + 1\n",
        "def f(x):\n    if x == 0:\n        return 1\n    return x + 1\n",
    ]
    for r in scorer.score([TASK, TASK], honest):
        assert r.score == 1.0 and not r.flags


# Right answers whose standard library asks for a frame on their behalf and falls back when
# refused: the refusal stands, but it is not the program's tampering
LIBRARY_ASKS = {
    "namedtuple": "from collections import namedtuple\nP = namedtuple('P', 'x')\n"
    "def f(x):\n    return P(x + 1).x\n",
    "enum": "import enum\nclass C(enum.Enum):\n    A = 1\ndef f(x):\n    return x + C.A.value\n",
    "logging": "import logging\nlogging.basicConfig()\ndef f(x):\n"
    "    logging.getLogger('f').warning('called')\n    return x + 1\n",
    "typing.NamedTuple": "from typing import NamedTuple\nclass P(NamedTuple):\n    x: int\n"
    "def f(x):\n    return P(x + 1).x\n",
}


@pytest.mark.parametrize("name", sorted(LIBRARY_ASKS))
def test_a_frame_the_library_asks_for_is_refused_but_not_the_programs_tampering(sandbox, name):
    scorer = RewardScorer(RewardConfig(tree={"type": "verdict_credit"}), sandbox=sandbox)
    (r,) = scorer.score([TASK], [LIBRARY_ASKS[name]])
    assert r.score == 1.0 and Flag.TAMPERING not in r.flags, (r.flags, r.reason)


def test_sys_getframe_refused_is_counted_and_gives_nothing(sandbox):
    scorer = RewardScorer(RewardConfig(tree={"type": "verdict_credit"}), sandbox=sandbox)
    asks = "import sys\ndef f(x):\n    sys._getframe(1)\n    return x + 1\n"
    (r,) = scorer.score([TASK], [asks])
    assert Flag.FRAME_REFUSED in r.flags and Flag.TAMPERING not in r.flags
    assert r.score == -0.6  # the refusal raised: a crash, as without the sandbox's frame


def test_penalties_can_be_off_and_counted_only(sandbox):
    config = RewardConfig(tree={"type": "verdict_credit"}, hacks=HackPolicy(penalties={}))
    scorer = RewardScorer(config, sandbox=sandbox)
    (r,) = scorer.score([TASK], ["import os\nos._exit(0)\n"])
    assert r.score == -0.6 and Flag.EARLY_EXIT in r.flags  # a crash, flagged, not capped


def test_hardcode_check_by_hand():
    lookup = "def f(x):\n    return {10: 11, 20: 21}[x]\n"
    assert hardcoded_tests(lookup, TASK) == (1, 1)
    honest = "def f(x):\n    return x + 1\n"
    assert hardcoded_tests(honest, TASK) == (0, 1)
    # trivial expected values (booleans, small ints) are never evidence
    bools = Task(
        "p",
        "",
        AssertTests(statements=("assert f(7) == True",)),
        "f",
        visible_tests=AssertTests(statements=("assert f(7) == True",)),
    )
    assert hardcoded_tests("def f(x):\n    if x == 7:\n        return True\n", bools) == (0, 0)
    # stdio: the printed answer keyed on the input line
    stdio = Task(
        "s",
        "",
        StdioTests((StdioCase("3 4\n", "12\n"),)),
        visible_tests=StdioTests((StdioCase("3 4\n", "12\n"),)),
    )
    assert hardcodes_visible("s = input()\nif s == '3 4':\n    print(12)\n", stdio)
    assert not hardcodes_visible("a, b = map(int, input().split())\nprint(a * b)\n", stdio)


def test_monitor_counts_and_summarises(sandbox, tmp_path):
    monitor = RewardMonitor(keep=1, gap_alarm=0.2)
    config = RewardConfig(tree={"type": "pass"}, run_visible=True)
    scorer = RewardScorer(config, sandbox=sandbox, monitor=monitor)
    programs = [
        "def f(x):\n    return x + 1\n",
        ATTACKS["hard-coded visible test"][0],
        ATTACKS["gc scan"][0],
    ]
    scorer.score([TASK] * 3, programs, step=7)
    m = scorer.last_metrics
    # visible pass rates 1, 1, 0 -> 2/3; hidden 1, 1/3, 0 -> 4/9; gap 2/9
    assert m["reward/visible_pass_rate"] == pytest.approx(2 / 3)
    assert m["reward/hidden_pass_rate"] == pytest.approx(4 / 9)
    assert m["reward/flag/hardcoded_visible"] == 1.0
    assert m["reward/flag/visible_hidden_gap"] == 1.0  # 1 - 1/3 >= 0.5
    summary = monitor.summary()
    assert summary.gap_alarm and summary.visible_hidden_gap == pytest.approx(2 / 9)
    assert summary.flag_counts["tampering"] == 1
    assert len(summary.flagged) == 1 and summary.flagged_dropped == 1  # keep=1
    assert summary.flagged[0].step == 7 and summary.flagged[0].task_id == "inc"
    summary.write(tmp_path / "s.json")
    assert '"hardcoded_visible"' in (tmp_path / "s.json").read_text()
