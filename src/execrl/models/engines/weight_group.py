"""The process group that carries a trainer's weights to its rollout engine's process: two
ranks, the trainer (0, the root of every broadcast) and its engine process (1).

It is built directly from a `TCPStore` of its own (`ProcessGroupGloo` / `ProcessGroupNCCL`), never
through `torch.distributed.init_process_group`: the trainer's default group (torchrun's, FSDP's)
is not touched, and each trainer process has a weight group with its own engine only. NCCL when
both ends hold their tensors on distinct GPUs; otherwise gloo over loopback (CPU tensors: a GPU
trainer's tensors are copied to the CPU one at a time). NCCL cannot join two processes on one
GPU, so an engine on the trainer's own GPU goes over gloo too.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

import torch
import torch.distributed as torch_dist

HOST = "127.0.0.1"  # an engine process runs on its trainer's machine
TRAINER, ENGINE = 0, 1


def backend_for(trainer_device: torch.device, engine_device: torch.device) -> str:
    """ "nccl" between two distinct GPUs, else "gloo"."""
    both_gpus = trainer_device.type == "cuda" and engine_device.type == "cuda"
    return "nccl" if both_gpus and trainer_device != engine_device else "gloo"


def trainer_store(timeout_s: float) -> torch_dist.TCPStore:
    """The store the trainer serves on a free loopback port (`.port` tells the engine)."""
    return torch_dist.TCPStore(HOST, 0, 2, True, _timedelta(timeout_s), wait_for_workers=False)


def engine_store(port: int, timeout_s: float) -> torch_dist.TCPStore:
    return torch_dist.TCPStore(HOST, port, 2, False, _timedelta(timeout_s), wait_for_workers=False)


@dataclass
class WeightGroup:
    """One side of the group: `device` is where its tensors must be for `backend`."""

    group: torch_dist.ProcessGroup
    rank: int
    device: torch.device

    @staticmethod
    def join(store: torch_dist.Store, rank: int, backend: str, device: torch.device,
             timeout_s: float) -> WeightGroup:  # fmt: skip
        """Blocks until the other side joins too (or `timeout_s` passes)."""
        prefixed = torch_dist.PrefixStore("execrl-weights", store)
        if backend == "nccl":
            torch.cuda.set_device(device)
            options = torch_dist.ProcessGroupNCCL.Options()
            options._timeout = _timedelta(timeout_s)
            group = torch_dist.ProcessGroupNCCL(prefixed, rank, 2, options)
            return WeightGroup(group, rank, device)
        options = torch_dist.ProcessGroupGloo._Options()
        options._devices = [torch_dist.ProcessGroupGloo.create_device(hostname=HOST)]
        options._timeout = _timedelta(timeout_s)
        group = torch_dist.ProcessGroupGloo(prefixed, rank, 2, options)
        return WeightGroup(group, rank, torch.device("cpu"))

    def send(self, tensor: torch.Tensor) -> None:
        """The trainer's side: `tensor` to the engine (a copy only if it is elsewhere or not
        contiguous)."""
        self._broadcast(tensor.detach().to(self.device).contiguous())

    def receive(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        """The engine's side: a fresh tensor holding what the trainer sent."""
        tensor = torch.empty(shape, dtype=dtype, device=self.device)
        self._broadcast(tensor)
        return tensor

    def _broadcast(self, tensor: torch.Tensor) -> None:
        options = torch_dist.BroadcastOptions()
        options.rootRank = TRAINER
        self.group.broadcast([tensor], options).wait()

    def close(self) -> None:
        shutdown = getattr(self.group, "shutdown", None)
        if shutdown is not None:
            shutdown()


def _timedelta(seconds: float) -> datetime.timedelta:
    return datetime.timedelta(seconds=seconds)
