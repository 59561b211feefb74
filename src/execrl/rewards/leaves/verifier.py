"""The `verifier` reward leaf: a domain verifier's score, or one of its named components
(docs/verifiers.md), for tasks graded by a verifier (`VerifierTests`).

    [reward.tree]
    type = "hierarchy"
    levels = [{ type = "verifier", component = "elaborates", value = 0.2 },
              { type = "verifier", component = "matches", value = 1.0 }]

On a task graded by unit tests, or a sample with no code, there is no verification: the leaf
gives 1.0 when the run passed and 0.0 otherwise, so a tree can mix both kinds of tasks.
"""

from __future__ import annotations

from dataclasses import dataclass

from execrl.rewards.base import HIDDEN
from execrl.rewards.leaves.execution import OnTests
from execrl.rewards.sample import Sample
from execrl.sandbox import ExecutionResult, load_verifier, verification_of
from execrl.tasks.schema import VerifierTests


@dataclass(frozen=True)
class VerifierScore(OnTests):
    """The verifier's score in [0, 1], or the component named `component`."""

    name: str = "verifier"
    component: str = ""  # "" the whole score; else e.g. "matches", "feasible", "image"
    tests: str = HIDDEN  # "hidden" or "visible"

    def score(self, result: ExecutionResult, sample: Sample) -> float:
        verification = verification_of(result)
        if verification is None:
            return float(result.passed)
        if not self.component:
            return verification.score
        if self.component not in verification.components:
            _check_component(sample, self.component)
        return verification.components.get(self.component, 0.0)


def _check_component(sample: Sample, component: str) -> None:
    """A component the verifier never reports is a typo in the config, not a zero score; one it
    reports only when the program gets that far (a match after a compile error) scores 0."""
    tests = sample.task.tests
    if not isinstance(tests, VerifierTests):
        return
    known = getattr(load_verifier(tests.verifier), "components", None)
    if known is not None and component not in known:
        raise ValueError(
            f"reward leaf verifier: component {component!r} is not one the {tests.verifier!r} "
            f"verifier reports (task {sample.task.id}); known: {list(known)}"
        )
