"""Verifier noise: seeded label flips at the asked rate, and flakiness by re-execution."""

from __future__ import annotations

import pytest

from execrl.rewards import LabelNoise, RewardConfig, RewardScorer
from execrl.rewards.result import Flag
from execrl.rewards.scoring.noise import NoiseInjector, flipped
from execrl.sandbox import Verdict
from execrl.tasks import AssertTests, Task

from .conftest import TASK, result


def flip_rate(noise: LabelNoise, passed: bool, n: int = 4000) -> float:
    inject = NoiseInjector(noise)
    r = result(Verdict.PASSED, 3) if passed else result(Verdict.WRONG_ANSWER, 1)
    return sum(inject(r)[1] for _ in range(n)) / n


def test_symmetric_and_asymmetric_rates():
    # binomial(4000, 0.2): sd = sqrt(4000 * 0.2 * 0.8) / 4000 = 0.0063; 0.03 is ~5 sd
    sym = LabelNoise(kind="symmetric", rate=0.2, seed=1)
    assert flip_rate(sym, True) == pytest.approx(0.2, abs=0.03)
    assert flip_rate(sym, False) == pytest.approx(0.2, abs=0.03)
    asym = LabelNoise(kind="asymmetric", false_negative=0.3, false_positive=0.0, seed=1)
    assert flip_rate(asym, True) == pytest.approx(0.3, abs=0.03)
    assert flip_rate(asym, False) == 0.0


def test_seeded_and_never_on_sandbox_errors():
    noise = LabelNoise(kind="symmetric", rate=0.5, seed=3)
    a, b = NoiseInjector(noise), NoiseInjector(noise)
    r = result(Verdict.PASSED, 3)
    assert [a(r)[1] for _ in range(50)] == [b(r)[1] for _ in range(50)]
    always = NoiseInjector(LabelNoise(kind="symmetric", rate=1.0))
    assert always(result(Verdict.SANDBOX_ERROR))[1] is False
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        LabelNoise(kind="symmetric", rate=1.5)


def test_flipped_results():
    down = flipped(result(Verdict.PASSED, 3))
    assert down.verdict is Verdict.WRONG_ANSWER and down.n_passed == 0
    up = flipped(result(Verdict.SYNTAX_ERROR))
    assert up.verdict is Verdict.PASSED and up.n_passed == 3 and up.pass_rate == 1.0


def test_scorer_injects_and_flags(sandbox):
    config = RewardConfig(noise=LabelNoise(kind="symmetric", rate=1.0))
    scorer = RewardScorer(config, sandbox=sandbox)
    (r,) = scorer.score([TASK], ["def f(x):\n    return x + 1\n"])
    assert r.score == 0.0 and Flag.NOISE_FLIPPED in r.flags  # a correct program, flipped


def test_flakiness_by_re_execution(sandbox):
    coin = "import os\ndef f(x):\n    return x + 1 if os.urandom(1)[0] % 2 else 0\n"
    task = Task(
        "coin",
        "",
        AssertTests(statements=tuple(f"assert f({i}) == {i + 1}" for i in range(20))),
        "f",
    )
    scorer = RewardScorer(RewardConfig(), sandbox=sandbox)
    report = scorer.flakiness([task, TASK], [coin, "def f(x):\n    return x + 1\n"], repeats=4)
    # the coin passes each of 20 tests with p = 1/2: four equal counts have p < 0.01
    assert report.sampled == (0, 1)
    assert report.flaky == (0,) and report.flaky_rate == 0.5
    assert report.verdicts[1] == ("PASSED",) * 4
    half = scorer.flakiness([TASK] * 4, ["def f(x):\n    return x + 1\n"] * 4, fraction=0.5, seed=0)
    assert len(half.sampled) == 2 and half.flaky == ()
