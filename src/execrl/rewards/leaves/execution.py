"""Execution rewards: all tests pass, the fraction that pass, partial credit by verdict class.

All three mask infrastructure failures (SANDBOX_ERROR) instead of scoring them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from execrl.rewards.base import HIDDEN, leaf, masked_if_infra
from execrl.rewards.result import RewardResult
from execrl.rewards.sample import Sample
from execrl.sandbox import ExecutionResult, Verdict

_TESTS = ("hidden", "visible")


def check_tests(tests: str) -> None:
    if tests not in _TESTS:
        raise ValueError(f"tests must be one of {_TESTS}, not {tests!r}")


class OnTests(ABC):
    """Base of a frozen dataclass leaf with fields `name` and `tests` ("hidden" or "visible")
    that scores the run of those tests in [0, 1]; a run that failed for the sandbox's reasons
    (SANDBOX_ERROR) is masked, never scored."""

    name: str
    tests: str

    def __post_init__(self) -> None:
        check_tests(self.tests)

    @property
    def needs(self) -> frozenset[str]:
        return frozenset({self.tests})

    @property
    def bounds(self) -> tuple[float, float]:
        return (0.0, 1.0)

    def __call__(self, sample: Sample) -> RewardResult:
        return masked_if_infra(sample, self.tests) or leaf(
            self.name, self.score(sample.execution(self.tests), sample)
        )

    @abstractmethod
    def score(self, r: ExecutionResult, sample: Sample) -> float:
        """The score of the run `r` of this leaf's tests, of `sample`."""


@dataclass(frozen=True)
class PassAll(OnTests):
    """1.0 when the run passed every test, else 0.0 (the binary RLVR reward)."""

    name: str = "pass"
    tests: str = HIDDEN  # "hidden" or "visible"

    def score(self, r: ExecutionResult, sample: Sample) -> float:
        return float(r.passed)


@dataclass(frozen=True)
class PassFraction(OnTests):
    """n_passed / n_tests.

    A run that failed as a whole (killed, or a limit hit) after every test it reported passed
    scores at most (n - 1) / n, so the fraction never ties a failing run with a passing one.
    """

    name: str = "pass_fraction"
    tests: str = HIDDEN

    def score(self, r: ExecutionResult, sample: Sample) -> float:
        if not r.n_tests:
            return 0.0
        fraction = r.n_passed / r.n_tests
        if not r.passed:
            fraction = min(fraction, (r.n_tests - 1) / r.n_tests)
        return fraction


@dataclass(frozen=True)
class Runs(OnTests):
    """1.0 when the program loaded and every test ran to an answer (right or wrong): no syntax
    error, crash or limit. The "it runs" level of a hierarchical reward."""

    name: str = "runs"
    tests: str = HIDDEN

    def score(self, r: ExecutionResult, sample: Sample) -> float:
        ran = r.verdict in (Verdict.PASSED, Verdict.WRONG_ANSWER) and all(
            t.verdict in (Verdict.PASSED, Verdict.WRONG_ANSWER) for t in r.tests
        )
        return float(ran and len(r.tests) == r.n_tests)


# CodeRL (Le et al. 2022, arXiv 2207.01780, eq. 4): -1 compile error, -0.6 runtime error,
# -0.3 failed unit test, +1 all pass. Limits count as runtime errors there; here they can be set.
CODERL_VALUES: dict[str, float] = {
    Verdict.PASSED.value: 1.0,
    Verdict.WRONG_ANSWER.value: -0.3,
    Verdict.RUNTIME_ERROR.value: -0.6,
    Verdict.TIMEOUT.value: -0.6,
    Verdict.MEMORY_LIMIT.value: -0.6,
    Verdict.OUTPUT_LIMIT.value: -0.6,
    Verdict.SYNTAX_ERROR.value: -1.0,
}


@dataclass(frozen=True)
class VerdictCredit:
    """Partial credit by the run's verdict class; `values` overrides CodeRL's per verdict."""

    name: str = "verdict_credit"
    tests: str = HIDDEN
    values: dict[str, float] = field(default_factory=dict)  # e.g. {"TIMEOUT": -0.8}

    def __post_init__(self) -> None:
        check_tests(self.tests)
        unknown = sorted(set(self.values) - set(CODERL_VALUES))
        if unknown:
            raise ValueError(
                f"verdict_credit values: unknown verdict(s) {unknown}; known: "
                f"{sorted(CODERL_VALUES)} (SANDBOX_ERROR is always masked, never scored)"
            )

    @property
    def table(self) -> dict[str, float]:
        return {**CODERL_VALUES, **{k: float(v) for k, v in self.values.items()}}

    @property
    def needs(self) -> frozenset[str]:
        return frozenset({self.tests})

    @property
    def bounds(self) -> tuple[float, float]:
        values = self.table.values()
        return (min(values), max(values))

    def __call__(self, sample: Sample) -> RewardResult:
        masked = masked_if_infra(sample, self.tests)
        if masked:
            return masked
        return leaf(self.name, self.table[sample.execution(self.tests).verdict.value])
