"""Open the sandbox a `SandboxConfig` names: this machine's pool, or Ray actors.

`backend = "ray"` sends execution to `ray_actors` actors of `workers` workers each
(`ray_backend.RaySandbox`), for when one machine's cores are not enough; `ray_address = "local"`
starts a Ray instance on this machine. `open_transport` gives the transport alone (what the
server queues runs on); `open_sandbox` the runner above it (`runner.JobRunner`), which every
caller that runs tasks uses. Both have `run_many(jobs)` and are context managers.
"""

from __future__ import annotations

from typing import Any

from execrl.sandbox.config import SandboxConfig
from execrl.sandbox.pool import WorkerPool
from execrl.sandbox.runner import JobRunner, Sandbox


def open_sandbox(config: SandboxConfig, **ray_init: Any) -> JobRunner:
    """A started sandbox (close it, or use it in a `with` block): the runner over the pool or
    the Ray actors. `ray_init` goes to `ray.init` when this call starts Ray."""
    if config.backend == "local":
        return Sandbox(config)
    return JobRunner(open_transport(config, **ray_init), config.ray_actors * config.workers)


def open_transport(config: SandboxConfig, max_queue: int | None = None, **ray_init: Any) -> Any:
    """The pool or the Ray actors alone, which run each job as it is. `max_queue`: Ray only,
    the runs it holds before refusing more (`execrl sandbox serve`'s --max-queue; the local pool
    has its queue in the server's dispatcher)."""
    if config.backend == "local":
        return WorkerPool(config)
    if config.backend == "ray":
        from execrl.sandbox.service.ray_backend import RaySandbox

        queue = {} if max_queue is None else {"max_queue": max_queue}
        return RaySandbox(
            config.ray_address,
            actors=config.ray_actors,
            workers_per_actor=config.workers,
            max_retries=config.max_retries,
            allow_missing_layers=config.allow_missing_layers,
            cpus_per_actor=config.ray_cpus_per_actor,
            init_kwargs=ray_init or None,
            start_timeout_s=config.start_timeout_s,
            **queue,
        )
    raise ValueError(f'sandbox.backend = {config.backend!r}; choose "local" or "ray"')
