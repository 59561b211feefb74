"""Verifier noise: measure flaky verdicts by re-execution, and inject label noise on purpose.

Label noise follows the imperfect-verifier setting: a false negative turns a pass into a fail, a
false positive a fail into a pass. Symmetric noise flips either way with `rate`; asymmetric noise
has its own `false_negative` and `false_positive` rates. SANDBOX_ERROR results are never flipped:
they are masked, not labels.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

from execrl.sandbox import ExecutionResult, Job, TestOutcome, Verdict

NOISE_MESSAGE = "label flipped by injected verifier noise"


@dataclass(frozen=True)
class LabelNoise:
    kind: str = "none"  # "none", "symmetric" or "asymmetric"
    rate: float = 0.0  # symmetric: probability of flipping any verdict
    false_negative: float = 0.0  # asymmetric: P(pass -> fail)
    false_positive: float = 0.0  # asymmetric: P(fail -> pass)
    seed: int = 0

    def __post_init__(self) -> None:
        if self.kind not in ("none", "symmetric", "asymmetric"):
            raise ValueError(f"noise.kind must be none, symmetric or asymmetric, not {self.kind!r}")
        for name in ("rate", "false_negative", "false_positive"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"noise.{name} must be in [0, 1], got {getattr(self, name)}")

    def flip_probability(self, passed: bool) -> float:
        if self.kind == "symmetric":
            return self.rate
        if self.kind == "asymmetric":
            return self.false_negative if passed else self.false_positive
        return 0.0


def flipped(result: ExecutionResult) -> ExecutionResult:
    """The result with its label reversed: every test passed, or every test failed."""
    n = result.n_tests
    if result.passed:
        tests = tuple(TestOutcome(i, Verdict.WRONG_ANSWER, None, NOISE_MESSAGE) for i in range(n))
        return replace(result, verdict=Verdict.WRONG_ANSWER, tests=tests, message=NOISE_MESSAGE)
    tests = tuple(TestOutcome(i, Verdict.PASSED) for i in range(n))
    return replace(result, verdict=Verdict.PASSED, tests=tests, message="", tampering=())


class NoiseInjector:
    """Seeded: the same sequence of results gets the same flips."""

    def __init__(self, noise: LabelNoise) -> None:
        self.noise = noise
        self._rng = random.Random(noise.seed)

    def __call__(self, result: ExecutionResult) -> tuple[ExecutionResult, bool]:
        if self.noise.kind == "none" or result.verdict is Verdict.SANDBOX_ERROR:
            return result, False
        if self._rng.random() < self.noise.flip_probability(result.passed):
            return flipped(result), True
        return result, False


@dataclass(frozen=True)
class FlakinessReport:
    sampled: tuple[int, ...]  # indices of the jobs re-executed
    verdicts: tuple[tuple[str, ...], ...]  # per sampled job, its verdict on each repeat
    n_passed: tuple[tuple[int, ...], ...]  # per sampled job, tests passed on each repeat

    @property
    def flaky(self) -> tuple[int, ...]:
        """Jobs whose verdict or number of passed tests changed between repeats."""
        return tuple(
            i
            for i, v, p in zip(self.sampled, self.verdicts, self.n_passed, strict=True)
            if len(set(v)) > 1 or len(set(p)) > 1
        )

    @property
    def flaky_rate(self) -> float:
        return len(self.flaky) / len(self.sampled) if self.sampled else 0.0

    @property
    def verdict_counts(self) -> dict[str, int]:
        return dict(Counter(v for vs in self.verdicts for v in vs))


def measure_flakiness(
    sandbox: object,
    jobs: Sequence[Job],
    repeats: int = 3,
    fraction: float = 1.0,
    seed: int = 0,
) -> FlakinessReport:
    """Re-execute a seeded `fraction` of `jobs` `repeats` times each on `sandbox` (a Sandbox)."""
    if repeats < 2:
        raise ValueError(f"repeats must be at least 2 to see flakiness, got {repeats}")
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    k = max(1, round(fraction * len(jobs))) if jobs else 0
    sampled = tuple(sorted(random.Random(seed).sample(range(len(jobs)), k)))
    runs = sandbox.run_many([jobs[i] for i in sampled for _ in range(repeats)])  # type: ignore[attr-defined]
    verdicts, passed = [], []
    for j in range(len(sampled)):
        chunk = runs[j * repeats : (j + 1) * repeats]
        verdicts.append(tuple(r.verdict.value for r in chunk))
        passed.append(tuple(r.n_passed for r in chunk))
    return FlakinessReport(sampled, tuple(verdicts), tuple(passed))
