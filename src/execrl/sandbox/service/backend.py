"""Open the sandbox a `SandboxConfig` names: this machine's pool, or Ray actors.

`backend = "ray"` sends execution to `ray_actors` actors of `workers` workers each
(`ray_backend.RaySandbox`), for when one machine's cores are not enough; `ray_address = "local"`
starts a Ray instance on this machine. Both have `run_many(jobs)` and are context managers.
"""

from __future__ import annotations

from typing import Any

from execrl.sandbox.pool import Sandbox, SandboxConfig


def open_sandbox(config: SandboxConfig, max_queue: int | None = None, **ray_init: Any) -> Any:
    """A started sandbox (close it, or use it in a `with` block). `max_queue`: Ray only, the
    runs it holds before refusing more (`execrl sandbox serve`'s --max-queue; the local pool
    has its queue in the server's dispatcher). `ray_init` goes to `ray.init` when this call
    starts Ray."""
    if config.backend == "local":
        return Sandbox(config)
    if config.backend == "ray":
        from execrl.sandbox.service.ray_backend import RaySandbox

        queue = {} if max_queue is None else {"max_queue": max_queue}
        return RaySandbox(
            config.ray_address,
            actors=config.ray_actors,
            workers_per_actor=config.workers,
            max_retries=config.max_retries,
            allow_missing_layers=config.allow_missing_layers,
            init_kwargs=ray_init or None,
            **queue,
        )
    raise ValueError(f'sandbox.backend = {config.backend!r}; choose "local" or "ray"')
