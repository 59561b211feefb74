"""The `[dist]` of a run: how the processes `torchrun` starts share the model (docs/engines.md).

"ddp" (the default) keeps a whole copy of the policy, its optimiser state, the reference and the
value head in every process and all-reduces the gradients; "fsdp" shards them with torch's
FSDP2 (`fully_shard`, one unit per decoder layer, then the root: `rl.parallel.fsdp`), so each
process holds 1/N of the parameters, gradients and Adam state between uses. In one process "fsdp"
runs on a process group of one: the same code, the same sharded checkpoints, which is what lets a
run saved by two processes resume in one and the other way round (`rl.parallel.dist_checkpoint`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from execrl.rl.files.toml_config import ConfigError

STRATEGIES = ("ddp", "fsdp")
DTYPES = ("", "float32", "bfloat16", "float16")  # "": the model's own (model.dtype)
# the fields every strategy reads; the others are FSDP's alone
EVERY_STRATEGY = ("strategy", "activation_checkpointing")


@dataclass(frozen=True, slots=True)
class DistConfig:
    """The `[dist]` of a run; every field but strategy is FSDP's and needs strategy = "fsdp"."""

    strategy: str = "ddp"  # ddp | fsdp
    # FSDP mixed precision (`MixedPrecisionPolicy`): the dtype of the gathered parameters that
    # forward and backward compute in, and of the gradient reduce-scatter. The sharded
    # parameters, and the optimizer step, stay in model.dtype. "": model.dtype
    param_dtype: str = ""
    reduce_dtype: str = ""
    # FSDP `CPUOffloadPolicy`: sharded parameters, gradients and Adam state live in host memory
    # and the optimizer steps there; a GPU holds the gathered layers only
    cpu_offload: bool = False
    # Recompute each decoder layer's activations in backward instead of keeping them: memory
    # for one more forward. Under FSDP torch's composable `checkpoint` on every layer; one
    # process or DDP, Hugging Face's gradient checkpointing (non-reentrant)
    activation_checkpointing: bool = False
    # strategy = "fsdp": write the sharded checkpoint in the background (`dcp.async_save`)
    # while training goes on; false writes it before the next step
    async_checkpoint: bool = True

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ValueError(f"strategy = {self.strategy!r}; choose one of {', '.join(STRATEGIES)}")
        for name in ("param_dtype", "reduce_dtype"):
            if getattr(self, name) not in DTYPES:
                raise ValueError(
                    f"{name} = {getattr(self, name)!r}; choose one of {', '.join(DTYPES[1:])} "
                    "or '' (model.dtype)"
                )
        if self.strategy != "fsdp":
            given = [f.name for f in fields(self) if f.name not in EVERY_STRATEGY
                     and getattr(self, f.name) != f.default]  # fmt: skip
            if given:
                raise ValueError(
                    f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} FSDP's: set "
                    f"strategy = 'fsdp' (it is {self.strategy!r}), or remove "
                    f"{'it' if len(given) == 1 else 'them'}"
                )

    @property
    def sharded(self) -> bool:
        return self.strategy == "fsdp"


def check_dist(dist: DistConfig, max_staleness: int, where: str) -> None:
    """What FSDP cannot be combined with yet, said before any model loads. (A vLLM engine
    takes the sharded weights one decoder layer at a time: `rl.parallel.fsdp.unit_weights`.)"""
    if not dist.sharded:
        return
    if max_staleness:
        raise ConfigError(
            f"{where}: dist.strategy = 'fsdp' with rl.max_staleness = {max_staleness}: the "
            "rollout thread samples a whole copy of the policy; set rl.max_staleness = 0"
        )
