"""The execution sandbox: fork-server workers, isolation layers, trusted grading, verdicts.

Names are loaded on first use, so that the worker process (`python -m execrl.sandbox.run.worker`)
imports only what it needs: every megabyte it holds is copied into page tables at each fork.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "Confinement": "execrl.sandbox.confine.command",
    "launcher_argv": "execrl.sandbox.confine.command",
    "ExecutionResult": "execrl.sandbox.grading.verdict",
    "SandboxErrorCause": "execrl.sandbox.grading.verdict",
    "TestOutcome": "execrl.sandbox.grading.verdict",
    "Verdict": "execrl.sandbox.grading.verdict",
    "Job": "execrl.sandbox.grading.job",
    "Limits": "execrl.sandbox.grading.limits",
    "JobRunner": "execrl.sandbox.runner",
    "Sandbox": "execrl.sandbox.runner",
    "SandboxConfig": "execrl.sandbox.config",
    "SandboxUnavailable": "execrl.sandbox.pool",
    "WorkerPool": "execrl.sandbox.pool",
    "run_jobs": "execrl.sandbox.runner",
}
__all__ = [
    "Confinement",
    "ExecutionResult",
    "Job",
    "JobRunner",
    "Limits",
    "Sandbox",
    "SandboxConfig",
    "SandboxErrorCause",
    "SandboxUnavailable",
    "TestOutcome",
    "Verdict",
    "WorkerPool",
    "launcher_argv",
    "run_jobs",
]

if TYPE_CHECKING:
    from execrl.sandbox.config import SandboxConfig
    from execrl.sandbox.confine.command import Confinement, launcher_argv
    from execrl.sandbox.grading.job import Job
    from execrl.sandbox.grading.limits import Limits
    from execrl.sandbox.grading.verdict import (
        ExecutionResult,
        SandboxErrorCause,
        TestOutcome,
        Verdict,
    )
    from execrl.sandbox.pool import SandboxUnavailable, WorkerPool
    from execrl.sandbox.runner import JobRunner, Sandbox, run_jobs


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'execrl.sandbox' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
