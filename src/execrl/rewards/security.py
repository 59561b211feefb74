"""Security findings from bandit, weighted by severity."""

from __future__ import annotations

import logging
import os
import tempfile
import warnings
from dataclasses import dataclass, field

from execrl.rewards.base import leaf, require
from execrl.rewards.result import RewardResult
from execrl.rewards.sample import Sample
from execrl.rewards.syntax import parses

DEFAULT_SEVERITY = {"LOW": 0.1, "MEDIUM": 0.3, "HIGH": 0.6}


def bandit_findings(program: str) -> list[tuple[str, str]]:
    """(severity, test id) of each finding, e.g. ("HIGH", "B602")."""
    require("bandit", "security")
    logging.getLogger("bandit").setLevel(logging.ERROR)
    # bandit reads files; one private temporary directory per call keeps threads apart
    with tempfile.TemporaryDirectory(prefix="execrl-bandit-") as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # bandit's plugin loader warns about its own arguments
        from bandit.core import config, manager

        mgr = manager.BanditManager(config.BanditConfig(), "file", quiet=True)
        path = os.path.join(tmp, "candidate.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(program)
        mgr.discover_files([path])
        mgr.run_tests()
    return [(str(i.severity), str(i.test_id)) for i in mgr.get_issue_list()]


@dataclass(frozen=True)
class Security:
    """-min(max_penalty, sum of severity weights of bandit's findings)."""

    name: str = "security"
    severity: dict[str, float] = field(default_factory=dict)  # over DEFAULT_SEVERITY
    max_penalty: float = 1.0

    def __post_init__(self) -> None:
        unknown = sorted(set(self.severity) - set(DEFAULT_SEVERITY))
        if unknown:
            raise ValueError(
                f"security severity: unknown levels {unknown}; known: {sorted(DEFAULT_SEVERITY)}"
            )

    @property
    def needs(self) -> frozenset[str]:
        return frozenset()

    @property
    def bounds(self) -> tuple[float, float]:
        return (-self.max_penalty, 0.0)

    def __call__(self, sample: Sample) -> RewardResult:
        if not parses(sample.program):
            return leaf(self.name, -self.max_penalty)
        assert sample.program is not None
        w = {**DEFAULT_SEVERITY, **self.severity}
        penalty = sum(w.get(sev, 0.0) for sev, _ in bandit_findings(sample.program))
        return leaf(self.name, -min(self.max_penalty, penalty))
