"""Security findings from bandit, or from ruff's S rules (bandit's tests), weighted by severity."""

from __future__ import annotations

import io
import logging
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from execrl.rewards.analysis.analysis import Analysis
from execrl.rewards.base import require
from execrl.rewards.leaves.analysis_leaf import AnalysisPenalty

DEFAULT_SEVERITY = {"LOW": 0.1, "MEDIUM": 0.3, "HIGH": 0.6}
_FILENAME = "candidate.py"
_local = threading.local()  # one bandit manager per thread: bandit's objects are not shared


def _manager() -> Any:
    """A manager built once per thread: loading bandit's test set costs as much as a scan."""
    mgr = getattr(_local, "manager", None)
    if mgr is None:
        logging.getLogger("bandit").setLevel(logging.ERROR)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # bandit's plugin loader warns about its arguments
            from bandit.core import config, manager

            # ignore_nosec: a program cannot silence its own findings with `# nosec`
            mgr = manager.BanditManager(
                config.BanditConfig(), "file", quiet=True, ignore_nosec=True
            )
        _local.manager = mgr
    return mgr


def bandit_findings(program: str) -> list[tuple[str, str]]:
    """(severity, test id) of each finding, e.g. ("HIGH", "B602").

    Scans from memory the way bandit scans a file (its `_parse_file`: nosec comments, the AST
    visitor, the whole-file tests), with the manager's per-file state reset: no temporary
    files and no per-call test-set loading, which were two thirds of the cost.
    `tests/rewards/test_analysis_pool.py` checks it against bandit's own file scan."""
    require("bandit", "security")
    mgr = _manager()  # first: bandit's first import warns, and _manager silences that
    from bandit.core import meta_ast, metrics

    mgr.results, mgr.scores, mgr.skipped = [], [], []
    mgr.metrics, mgr.b_ma = metrics.Metrics(), meta_ast.BanditMetaAst()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mgr._parse_file(_FILENAME, io.BytesIO(program.encode("utf-8")), [_FILENAME])
    return [(str(i.severity), str(i.test_id)) for i in mgr.get_issue_list()]


def _tree_bandit_findings(program: str, tree: object) -> list[tuple[str, str]]:
    """The `Analysis` form: bandit parses the source itself; the tree says it parses."""
    return bandit_findings(program)


BANDIT = Analysis("bandit", _tree_bandit_findings)


@dataclass(frozen=True)
class Security(AnalysisPenalty):
    """-min(max_penalty, sum of severity weights of bandit's findings). With `backend = "ruff"`
    the findings are ruff's S rules, each at the severity bandit gives its test."""

    name: str = "security"
    severity: dict[str, float] = field(default_factory=dict)  # over DEFAULT_SEVERITY
    max_penalty: float = 1.0
    backend: str = "bandit"  # or "ruff": its S rules, one subprocess per chunk

    def __post_init__(self) -> None:
        unknown = sorted(set(self.severity) - set(DEFAULT_SEVERITY))
        if unknown:
            raise ValueError(
                f"security severity: unknown levels {unknown}; known: {sorted(DEFAULT_SEVERITY)}"
            )
        if self.backend not in ("bandit", "ruff"):
            raise ValueError(f'security backend: {self.backend!r} must be "bandit" or "ruff"')

    @cached_property
    def _backend(self) -> tuple[Analysis, Callable[[Any], Any]]:
        """The analysis and the reading of its result into (severity, test id), chosen once."""
        if self.backend == "bandit":
            return BANDIT, _as_findings
        from execrl.rewards.analysis.ruff_backend import ruff_analysis

        return ruff_analysis(), _ruff_security

    def penalty(self, found: list[tuple[str, str]]) -> float:
        w = {**DEFAULT_SEVERITY, **self.severity}
        return sum(w.get(sev, 0.0) for sev, _ in found)


def _as_findings(findings: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return findings


def _ruff_security(findings: Any) -> tuple[tuple[str, str], ...]:
    return findings.security  # a ruff_backend.RuffFindings
