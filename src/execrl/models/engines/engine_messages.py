"""What a trainer and its engine process (`models.engines.remote_engine`,
`models.engines.engine_process`) say over their pipe: small records, pickled by `multiprocessing`.
The tensors of a weight push do not go over the pipe: each `TensorSpec` announces one, which then
comes over the weight group (`models.engines.weight_group`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from execrl.models.engines.sampling import Completion, SamplingParams


@dataclass(frozen=True, slots=True)
class EngineSpec:
    """What the engine process builds: engine `name` on `device` from the policy the trainer
    wrote to `directory`, with torch's `threads`, joining the weight group at `port`."""

    name: str
    device: str
    directory: str
    dtype: str
    threads: int
    port: int
    backend: str
    timeout_s: float
    options: dict[str, Any] = field(default_factory=dict)  # the engine's own (vLLM's)


@dataclass(frozen=True, slots=True)
class RngStates:
    """torch's generators as a seeded in-process engine would draw from them: the CPU's, and the
    trainer's GPU's when it has one. They travel with a request and come back with its result,
    so the trainer's generators end where a colocated engine would have left them."""

    cpu: torch.Tensor
    cuda: torch.Tensor | None = None

    @staticmethod
    def here(device: torch.device | None) -> RngStates:
        cuda = torch.cuda.get_rng_state(device) if _gpu(device) else None
        return RngStates(torch.random.get_rng_state(), cuda)

    def restore(self, device: torch.device | None) -> None:
        torch.random.set_rng_state(self.cpu)
        if self.cuda is not None and _gpu(device):
            torch.cuda.set_rng_state(self.cuda, device)


@dataclass(frozen=True, slots=True)
class Ready:
    pid: int


@dataclass(frozen=True, slots=True)
class Generate:
    prompt_ids: list[list[int]]
    params: SamplingParams
    n: int
    rng: RngStates


@dataclass(frozen=True, slots=True)
class Generated:
    completions: list[Completion]
    rng: RngStates


@dataclass(frozen=True, slots=True)
class PushStart:
    """A weight push begins: `TensorSpec`s follow, each with its tensor over the group."""


@dataclass(frozen=True, slots=True)
class TensorSpec:
    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype


@dataclass(frozen=True, slots=True)
class PushEnd:
    tensors: int


@dataclass(frozen=True, slots=True)
class Pushed:
    tensors: int


@dataclass(frozen=True, slots=True)
class Failed:
    """A request failed in the engine process (the process lives on): what it said."""

    error: str


@dataclass(frozen=True, slots=True)
class Stop:
    pass


def _gpu(device: torch.device | None) -> bool:
    return device is not None and device.type == "cuda"
