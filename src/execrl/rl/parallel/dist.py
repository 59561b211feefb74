"""torch.distributed helpers that are no-ops in a single process (gloo on CPU, NCCL on GPU).

Gradients are all-reduced with SUM, not averaged: every loss is already normalised by the
global batch's counts (`rl.objective.losses`), so the sum is the full-batch gradient. FSDP's
reduce-scatter is set to sum as well (`rl.parallel.fsdp`).

How the update reaches the processes is a `Strategy`: `Replicated` here (every process a whole
copy, "ddp" and one process), `rl.parallel.fsdp.Sharded` for dist.strategy = "fsdp".
"""

from __future__ import annotations

import contextlib
import gc
import math
import os
from collections.abc import Iterable, Iterator
from typing import Any, Protocol

import torch
import torch.distributed as torch_dist

from execrl.models.engines.weights import plain_weights


def active() -> bool:
    return torch_dist.is_available() and torch_dist.is_initialized()


def rank() -> int:
    return torch_dist.get_rank() if active() else 0


def world_size() -> int:
    return torch_dist.get_world_size() if active() else 1


def init_from_env() -> bool:
    """Join the process group torchrun describes (WORLD_SIZE > 1); True if distributed."""
    if active() or int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return active()
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    torch_dist.init_process_group(backend)
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    return True


@contextlib.contextmanager
def group_of_one(wanted: bool) -> Iterator[None]:
    """Inside, a process group of one where `wanted` and no group is joined (no torchrun):
    FSDP's device mesh needs a group, and with one the single process runs the sharded code and
    reads and writes the sharded checkpoints. Left on the way out."""
    if not wanted or active():
        yield
        return
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    torch_dist.init_process_group(backend, store=torch_dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        torch_dist.destroy_process_group()
        release_group_references()


def release_group_references() -> None:
    """Free, in this process while its threads exist, what still holds a destroyed group:
    DTensor's sharding cache is thread-local, and a fork from another thread (the sandbox
    pool's reaper) clears this thread's state in the child, where the last reference's
    destructor then waits forever on a gloo thread the fork did not copy (gdb: the default
    test tier hung in ~ProcessGroupGloo, under PyOS_AfterFork_Child)."""
    clear = getattr(torch._C, "_clear_DTensor_sharding_propagator_cache", None)
    if clear is not None:
        clear()
    gc.collect()


def all_reduce_sum(x: torch.Tensor) -> torch.Tensor:
    if active():
        device = x.device
        # NCCL reduces CUDA tensors only; gloo takes them where they are
        y = x.cuda() if torch_dist.get_backend() == "nccl" else x.clone()
        torch_dist.all_reduce(y, op=torch_dist.ReduceOp.SUM)
        x = y.to(device)
    return x


def all_reduce_grads(params: list[torch.nn.Parameter]) -> None:
    if not active():
        return
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    flat = torch.cat([p.grad.reshape(-1) for p in params])
    torch_dist.all_reduce(flat, op=torch_dist.ReduceOp.SUM)
    offset = 0
    for p in params:
        n = p.numel()
        p.grad.copy_(flat[offset : offset + n].view_as(p))
        offset += n


def all_gather_objects(obj: Any) -> list[Any]:
    if not active():
        return [obj]
    out: list[Any] = [None] * world_size()
    torch_dist.all_gather_object(out, obj)
    return out


def barrier() -> None:
    if active():
        torch_dist.barrier()


class Strategy(Protocol):
    """What the update asks of the way processes share the model (`Learner.update`)."""

    def gathered(self, *modules: Any) -> contextlib.AbstractContextManager[None]:
        """The modules' whole parameters in place while inside (sampling, advantages)."""
        ...

    def balanced(self, batches: list[Any]) -> list[Any]:
        """The micro-batches this process runs, so that every process runs as many."""
        ...

    def weights(self, model: Any) -> Iterable[tuple[str, torch.Tensor]]:
        """The model's whole weights for an engine with its own copy (vLLM), under the base
        model's names (`models.engines.weights.WeightSource`); every process calls it together."""
        ...

    def reduce_and_clip(self, params: list[torch.nn.Parameter], max_norm: float) -> float:
        """Sum the gradients over the processes, clip them to max_norm (0: no clip) by their
        norm over every process's, and return that norm."""
        ...


class Replicated:
    """Every process holds the whole model ("ddp", and one process): gradients all-reduced."""

    name = "ddp"

    @contextlib.contextmanager
    def gathered(self, *modules: Any) -> Iterator[None]:
        yield

    def balanced(self, batches: list[Any]) -> list[Any]:
        return batches  # the all-reduce waits after the last micro-batch, however many

    def weights(self, model: Any) -> Iterable[tuple[str, torch.Tensor]]:
        return plain_weights(model)

    def reduce_and_clip(self, params: list[torch.nn.Parameter], max_norm: float) -> float:
        all_reduce_grads(params)
        return float(torch.nn.utils.clip_grad_norm_(params, max_norm or math.inf))
