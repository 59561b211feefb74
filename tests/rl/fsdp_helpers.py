"""What the FSDP tests share: a fixed set of micro-batches, the update run over them through the
door `execrl train` uses (`rl.setup.build` of a config), and two processes spawned with gloo."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path

import torch
import torch.multiprocessing as mp
from torch.distributed.tensor import DTensor

from execrl.rl import setup
from execrl.rl.objective.logprobs import collate
from execrl.rl.objective.losses import Batch
from execrl.rl.parallel import dist

from .conftest import tasks, tiny_config

N_BATCHES = 3  # odd: one process runs one more than the other, the blank pads its turn


def batches(pad_id: int, values: bool, seed: int = 0) -> tuple[list[Batch], float]:
    """N_BATCHES micro-batches of four rows, two prompts each (a repeated prompt takes the
    shared-prompt forward in one process), and the global token count they are normalised by."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(N_BATCHES):
        prompts = [torch.randint(3, 200, (int(torch.randint(2, 5, (1,), generator=g)),),
                                 generator=g) for _ in range(2)]  # fmt: skip
        rows = [prompts[i // 2] for i in range(4)]
        completions = [torch.randint(3, 200, (int(torch.randint(1, 6, (1,), generator=g)),),
                                     generator=g) for _ in rows]  # fmt: skip
        seqs = collate(rows, completions, pad_id)
        mask = seqs.token_mask

        def noise(scale: float, shift: float = 0.0, mask: torch.Tensor = mask) -> torch.Tensor:
            return (torch.randn(mask.shape, generator=g) * scale + shift) * mask

        out.append(Batch(
            sequences=seqs, old_logp=noise(0.3, -5.5), advantages=noise(1.0), mask=mask,
            ref_logp=noise(0.3, -5.5), tasks=torch.arange(4),
            old_values=noise(0.1) if values else None,
            value_targets=noise(1.0) if values else None,
        ))  # fmt: skip
    return out, float(sum(b.mask.sum() for b in out))


def full(t: torch.Tensor) -> torch.Tensor:
    return (t.full_tensor() if isinstance(t, DTensor) else t).detach().clone()


def three_updates(model_dir: Path, out_dir: Path, *extra: str) -> dict:
    """Loss and gradients of the first update, weights after the third, of the config's learner
    on this process's share of `batches` (all of them in one process)."""
    config = tiny_config(model_dir, out_dir, "rl.kl_coef=0.1", "rl.entropy_coef=0.01",
                         "optim.grad_clip=0.5", *extra)  # fmt: skip
    built = setup.build(config, tasks(), [])
    learner = built.learner
    mine, denominator = batches(built.policy.tokenizer.pad_token_id, learner.value_head is not None)
    mine = mine[dist.rank() :: dist.world_size()]
    out: dict = {}
    for step in range(3):
        metrics = learner.update(mine, denominator)
        if step == 0:
            out["loss"], out["grad_norm"] = metrics.loss, metrics.grad_norm
            out["grads"] = {n: full(p.grad) for n, p in _trained(learner) if p.grad is not None}
    out["weights"] = {n: full(p) for n, p in _trained(learner)}
    return out


def _trained(learner) -> list[tuple[str, torch.nn.Parameter]]:
    named = [(n, p) for n, p in learner.model.named_parameters() if p.requires_grad]
    if learner.value_head is not None:
        named += [(f"value_head.{n}", p) for n, p in learner.value_head.named_parameters()]
    return named


def spawn_two(worker: Callable, *args) -> None:
    """`worker(rank, 2, port, *args)` in two processes joined over loopback with gloo."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(2, port, *args), nprocs=2, join=True)


def joined(rank: int, world: int, port: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world), LOCAL_RANK=str(rank))  # fmt: skip
    torch.set_num_threads(1)
    torch.distributed.init_process_group("gloo", rank=rank, world_size=world)
