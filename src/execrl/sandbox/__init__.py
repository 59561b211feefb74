"""The execution sandbox: fork-server workers, isolation layers, trusted grading, verdicts.

Names are loaded on first use, so that the worker process (`python -m execrl.sandbox.worker`)
imports only what it needs: every megabyte it holds is copied into page tables at each fork.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "ExecutionResult": "execrl.sandbox.verdict",
    "SandboxErrorCause": "execrl.sandbox.verdict",
    "TestOutcome": "execrl.sandbox.verdict",
    "Verdict": "execrl.sandbox.verdict",
    "Job": "execrl.sandbox.job",
    "Limits": "execrl.sandbox.limits",
    "Sandbox": "execrl.sandbox.pool",
    "SandboxConfig": "execrl.sandbox.pool",
    "SandboxUnavailable": "execrl.sandbox.pool",
    "run_jobs": "execrl.sandbox.pool",
}
__all__ = [
    "ExecutionResult",
    "Job",
    "Limits",
    "Sandbox",
    "SandboxConfig",
    "SandboxErrorCause",
    "SandboxUnavailable",
    "TestOutcome",
    "Verdict",
    "run_jobs",
]

if TYPE_CHECKING:
    from execrl.sandbox.job import Job
    from execrl.sandbox.limits import Limits
    from execrl.sandbox.pool import Sandbox, SandboxConfig, SandboxUnavailable, run_jobs
    from execrl.sandbox.verdict import (
        ExecutionResult,
        SandboxErrorCause,
        TestOutcome,
        Verdict,
    )


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'execrl.sandbox' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
