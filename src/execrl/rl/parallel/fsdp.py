"""dist.strategy = "fsdp": the policy, the reference and the value head sharded by torch's FSDP2.

`fully_shard` wraps each decoder layer, then the root (the embedding, the final norm, the head),
so a process holds 1/N of every parameter, gradient and Adam state and gathers one layer at a
time in forward and backward. FSDP's collectives must be called by every process in the same
order, which execrl's step does not do on its own: a process samples, scores and trains only
its own groups. So:

- sampling and the fixed tensors of the update (old, reference log-probs, values) run inside
  `gathered`: every process gathers the whole module once, together, then runs as many forwards
  as its own groups need without a collective, and frees it after;
- the update's micro-batches are `balanced`: a process with fewer runs blank ones (a mask of
  zeros: no loss, no gradient) until every process has run as many, and each runs one forward
  per micro-batch (not the shared-prompt pass of `rl.objective.logprobs`, two forwards where a batch
  repeats a prompt, which a process decides alone);
- the reduce-scatter sums the gradients instead of averaging them (`rl.parallel.dist`: every loss is
  normalised by the global batch's counts already), and the clip uses the norm over every
  shard (`clip_grad_norm_` on DTensors).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Iterator
from typing import Any

import torch
from torch.distributed.fsdp import (
    CPUOffloadPolicy,
    FSDPModule,
    MixedPrecisionPolicy,
    OffloadPolicy,
    fully_shard,
)
from torch.distributed.tensor import DTensor

from execrl.models.engines.hf_forward import class_name
from execrl.models.engines.weights import is_adapter, plain_name
from execrl.rl.config.dist_config import DistConfig
from execrl.rl.objective.logprobs import collate
from execrl.rl.objective.losses import Batch
from execrl.rl.parallel import dist
from execrl.rl.parallel.dist_checkpoint import ShardedCheckpoints

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class Sharded:
    """The `rl.parallel.dist.Strategy` of FSDP; `blank` is the micro-batch that pads a process's
    turn."""

    name = "fsdp"

    def __init__(self, blank: Batch, checkpoints: ShardedCheckpoints) -> None:
        self.blank = blank
        self.checkpoints = checkpoints  # the run's sharded saves (`rl.checkpoint` asks)

    @contextlib.contextmanager
    def gathered(self, *modules: Any) -> Iterator[None]:
        roots = list({id(m): m for m in modules if m is not None}.values())  # LoRA: ref = policy
        inner = [m for root in roots for m in _units(root) if m is not root]
        for unit in inner:  # a root keeps its parameters after forward already (FSDP's own)
            unit.set_reshard_after_forward(False, recurse=False)
        for unit in [*roots, *inner]:
            unit.unshard()
        try:
            yield
        finally:
            for unit in [*roots, *inner]:
                unit.reshard()
            for unit in inner:
                unit.set_reshard_after_forward(True, recurse=False)

    def balanced(self, batches: list[Batch]) -> list[Batch]:
        mine = [_one_forward(b) for b in batches]
        most = max(dist.all_gather_objects(len(mine)))
        return mine + [self.blank] * (most - len(mine))

    def weights(self, model: Any) -> Iterator[tuple[str, torch.Tensor]]:
        return unit_weights(model)

    def reduce_and_clip(self, params: list[torch.nn.Parameter], max_norm: float) -> float:
        # FSDP reduce-scattered (summed) each gradient in backward; the norm is over all shards
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm or math.inf)
        return float(norm.full_tensor() if isinstance(norm, DTensor) else norm)


def shard(model: Any, reference: Any, value_head: torch.nn.Module | None, config: DistConfig,
          blank: Batch) -> Sharded:  # fmt: skip
    """Shard the modules in place (before the optimizer is made: it must hold the shards)."""
    mixed = MixedPrecisionPolicy(param_dtype=_DTYPES.get(config.param_dtype),
                                 reduce_dtype=_DTYPES.get(config.reduce_dtype))  # fmt: skip
    offload = (
        CPUOffloadPolicy(pin_memory=torch.cuda.is_available())
        if config.cpu_offload
        else OffloadPolicy()
    )
    options = {"mp_policy": mixed, "offload_policy": offload}
    if config.activation_checkpointing:
        from torch.distributed._composable import checkpoint

        for layer in decoder_layers(model):
            checkpoint(layer)
    _shard_model(model, options)
    # FSDP sets itself up at the root's first forward: run it now, on every process together.
    # Hugging Face generate under PEFT calls the model inside the root first, which would set
    # up each layer as a root of its own
    with torch.no_grad():
        model(input_ids=blank.sequences.input_ids)
    # a root keeps its parameters gathered after forward: the optimizer must take the shards
    model.reshard()
    if reference is not None and reference is not model:  # with LoRA the policy is its own
        _shard_model(reference, options)
    if value_head is not None:
        _summing(fully_shard(value_head, **options))
    return Sharded(blank, ShardedCheckpoints(config.async_checkpoint))


def _shard_model(model: Any, options: dict[str, Any]) -> None:
    for layer in decoder_layers(model):
        fully_shard(layer, **options)
    _summing(fully_shard(model, **options))


def _summing(root: FSDPModule) -> None:
    for unit in _units(root):
        unit.set_gradient_divide_factor(1.0)
        unit.set_force_sum_reduction_for_comms(True)  # gloo has no pre-multiplied sum


def decoder_layers(model: Any) -> list[torch.nn.Module]:
    """The model's decoder layers: the modules Hugging Face never splits across devices."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # PEFT
    names = set(getattr(base, "_no_split_modules", None) or ())
    layers = [m for m in base.modules() if class_name(m) in names]
    if not layers:
        raise ValueError(
            f"dist.strategy = 'fsdp': {type(base).__name__} names no decoder layers "
            "(_no_split_modules) to shard one by one; train it with dist.strategy = 'ddp'"
        )
    return layers


def blank_batch(pad_id: int, reference: bool, values: bool, device: torch.device) -> Batch:
    """A micro-batch of one padding token that counts for nothing (its mask is 0), with the
    tensors the loss reads: reference log-probs under a KL, old values and targets for PPO."""
    token = torch.tensor([pad_id])
    zeros = torch.zeros(1, 1, device=device)
    return Batch(
        sequences=collate([token], [token], pad_id).to(device),
        old_logp=zeros, advantages=zeros, mask=zeros,
        ref_logp=zeros if reference else None,
        old_values=zeros if values else None, value_targets=zeros if values else None,
    )  # fmt: skip


def _one_forward(batch: Batch) -> Batch:
    """The batch without its shared prompts: one forward, as on every other process."""
    if batch.sequences.shared is None:
        return batch
    return dataclasses.replace(batch, sequences=dataclasses.replace(batch.sequences, shared=None))


def _units(root: Any) -> list[FSDPModule]:
    return [m for m in root.modules() if isinstance(m, FSDPModule)]


def unit_weights(model: Any) -> Iterator[tuple[str, torch.Tensor]]:
    """The sharded policy's weights as `models.engines.weights.plain_weights` yields a whole one's
    (the same names and values; a LoRA policy's adapters merged), one FSDP unit at a time: a unit
    (a decoder layer, then the root's embedding, norm and head) is gathered, its tensors are
    yielded, and it is freed before the next is gathered, so a process never holds more than
    one unit whole (and the copies it yields that the consumer still holds). Every process
    iterates to the end together: each gather is a collective."""
    names = list(model.state_dict())  # the names alone: DTensors, nothing gathered
    by_unit: dict[int, list[str]] = {}
    units = {name: m for name, m in model.named_modules() if isinstance(m, FSDPModule)}
    for name in names:
        by_unit.setdefault(id(_owner(units, name)), []).append(name)
    lora = hasattr(model, "peft_config")
    for unit in units.values():
        mine = by_unit.get(id(unit), [])
        if not mine:
            continue
        unit.unshard()
        tuners = _tuners(model, units, unit) if lora else []
        try:
            with torch.no_grad():  # W + B A scaled, in the gathered copy the reshard drops
                for tuner in tuners:
                    tuner.merge()
            for name in mine:
                if not is_adapter(name):
                    # a copy: a consumer may hold it past the reshard (vLLM keeps a layer's
                    # weights until the layer is complete, a padded embedding to the end)
                    tensor = _tensor(model, name).detach().clone()
                    yield (plain_name(name) if lora else name), tensor
        finally:
            with torch.no_grad():
                for tuner in tuners:
                    tuner.unmerge()  # PEFT's flag: the policy trains unmerged
            unit.reshard()


def _owner(units: dict[str, FSDPModule], name: str) -> FSDPModule:
    """The unit that holds the parameter, buffer or module `name`: its innermost FSDP module."""
    parts = name.split(".")
    for end in range(len(parts), -1, -1):
        unit = units.get(".".join(parts[:end]))
        if unit is not None:
            return unit
    raise ValueError(
        f"{name} lies in no FSDP unit: was the model sharded (rl.parallel.fsdp.shard)?"
    )


def _tuners(model: Any, units: dict[str, FSDPModule], unit: FSDPModule) -> list[Any]:
    """The unit's own LoRA layers (PEFT's tuner layers not under another unit)."""
    from peft.tuners.tuners_utils import BaseTunerLayer

    return [m for name, m in model.named_modules()
            if isinstance(m, BaseTunerLayer) and _owner(units, name) is unit]  # fmt: skip


def _tensor(model: Any, name: str) -> torch.Tensor:
    try:
        return model.get_parameter(name)
    except AttributeError:
        return model.get_buffer(name)


def full_state_dict(model: Any) -> dict[str, torch.Tensor]:
    """The whole model's weights on rank 0's CPU (empty elsewhere); every process calls it."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(
        model, options=StateDictOptions(full_state_dict=True, cpu_offload=True)
    )
