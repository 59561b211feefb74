"""The execution sandbox: fork-server workers, isolation layers, trusted grading, verdicts.

This is the sandbox's face: the layers above import its names from here, never from its wings
(tests/test_layering.py holds them to it), so a wing can be split or moved without touching them.

Names are loaded on first use, so that the worker process (`python -m execrl.sandbox.run.worker`)
imports only what it needs: every megabyte it holds is copied into page tables at each fork.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# name -> the module that defines it under that name
_EXPORTS = {
    # confine: what `execrl sandbox doctor` probes, and what a tool harness confines itself with
    "Confinement": "execrl.sandbox.confine.command",
    "launcher_argv": "execrl.sandbox.confine.command",
    "probe_layers": "execrl.sandbox.confine.isolation",
    "key_syscall_filter": "execrl.sandbox.confine.syscalls",
    # grading: the job and verdict records, limits, languages
    "ExecutionResult": "execrl.sandbox.grading.verdict",
    "SandboxErrorCause": "execrl.sandbox.grading.verdict",
    "TestOutcome": "execrl.sandbox.grading.verdict",
    "Verdict": "execrl.sandbox.grading.verdict",
    "Job": "execrl.sandbox.grading.job",
    "reference_limits": "execrl.sandbox.grading.job",
    "Limits": "execrl.sandbox.grading.limits",
    "LanguageUnavailable": "execrl.sandbox.grading.languages",
    "probe_languages": "execrl.sandbox.grading.languages",
    "require_toolchains": "execrl.sandbox.grading.languages",
    # verifiers
    "load_verifier": "execrl.sandbox.verifiers",
    "verification_of": "execrl.sandbox.verifiers",
    # the root: the runner, its pool, its config, reference runs for the tasks layer
    "JobRunner": "execrl.sandbox.runner",
    "Sandbox": "execrl.sandbox.runner",
    "run_jobs": "execrl.sandbox.runner",
    "SandboxConfig": "execrl.sandbox.config",
    "SandboxConfigError": "execrl.sandbox.config",
    "moved_to_limits": "execrl.sandbox.config",
    "SandboxUnavailable": "execrl.sandbox.pool",
    "WorkerPool": "execrl.sandbox.pool",
    "sandbox_runner": "execrl.sandbox.reference_runner",
    # service: a local pool or Ray's actors by the config, and the HTTP server (needs fastapi:
    # importing `serve` raises the ImportError naming what is missing)
    "open_sandbox": "execrl.sandbox.service.backend",
    "serve": "execrl.sandbox.service.server",
    "ServerConfig": "execrl.sandbox.service.server_config",
}
# name -> (module, its name there): names that say little once out of their module
_RENAMED = {
    "path_inside": ("execrl.sandbox.confine.hidden_paths", "inside"),
    "hidden_benchmark_data": ("execrl.sandbox.confine.hidden_paths", "benchmark_data"),
    "default_kept_paths": ("execrl.sandbox.confine.hidden_paths", "default_keep"),
    "probe_memory": ("execrl.sandbox.confine.memcg", "probe"),
    "describe_value": ("execrl.sandbox.grading.compare", "describe"),
    "SKIPPED_AFTER_FAILURE": ("execrl.sandbox.grading.grade", "SKIPPED"),
}
# both tables' names; tests/sandbox/test_face.py keeps them and the imports below in step
__all__ = [
    "Confinement",
    "ExecutionResult",
    "Job",
    "JobRunner",
    "LanguageUnavailable",
    "Limits",
    "SKIPPED_AFTER_FAILURE",
    "Sandbox",
    "SandboxConfig",
    "SandboxConfigError",
    "SandboxErrorCause",
    "SandboxUnavailable",
    "ServerConfig",
    "TestOutcome",
    "Verdict",
    "WorkerPool",
    "default_kept_paths",
    "describe_value",
    "hidden_benchmark_data",
    "key_syscall_filter",
    "launcher_argv",
    "load_verifier",
    "moved_to_limits",
    "open_sandbox",
    "path_inside",
    "probe_languages",
    "probe_layers",
    "probe_memory",
    "reference_limits",
    "require_toolchains",
    "run_jobs",
    "sandbox_runner",
    "serve",
    "verification_of",
]

if TYPE_CHECKING:
    from execrl.sandbox.config import SandboxConfig, SandboxConfigError, moved_to_limits
    from execrl.sandbox.confine.command import Confinement, launcher_argv
    from execrl.sandbox.confine.hidden_paths import benchmark_data as hidden_benchmark_data
    from execrl.sandbox.confine.hidden_paths import default_keep as default_kept_paths
    from execrl.sandbox.confine.hidden_paths import inside as path_inside
    from execrl.sandbox.confine.isolation import probe_layers
    from execrl.sandbox.confine.memcg import probe as probe_memory
    from execrl.sandbox.confine.syscalls import key_syscall_filter
    from execrl.sandbox.grading.compare import describe as describe_value
    from execrl.sandbox.grading.grade import SKIPPED as SKIPPED_AFTER_FAILURE
    from execrl.sandbox.grading.job import Job, reference_limits
    from execrl.sandbox.grading.languages import (
        LanguageUnavailable,
        probe_languages,
        require_toolchains,
    )
    from execrl.sandbox.grading.limits import Limits
    from execrl.sandbox.grading.verdict import (
        ExecutionResult,
        SandboxErrorCause,
        TestOutcome,
        Verdict,
    )
    from execrl.sandbox.pool import SandboxUnavailable, WorkerPool
    from execrl.sandbox.reference_runner import sandbox_runner
    from execrl.sandbox.runner import JobRunner, Sandbox, run_jobs
    from execrl.sandbox.service.backend import open_sandbox
    from execrl.sandbox.service.server import serve
    from execrl.sandbox.service.server_config import ServerConfig
    from execrl.sandbox.verifiers import load_verifier, verification_of


def __getattr__(name: str) -> Any:
    # not cached in globals(): a test that patches the defining module is seen at the next use
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    if name in _RENAMED:
        module, attr = _RENAMED[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'execrl.sandbox' has no attribute {name!r}")
