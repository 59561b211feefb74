"""Checkpoints of an FSDP run (dist.strategy = "fsdp"): `torch.distributed.checkpoint`, sharded.

Each process writes its own shards of the policy, the value head and the Adam state into
`checkpoint/shards-<step>/` (DCP's files and its `.metadata`); rank 0 then writes `state.pt`, the
small rest (`rl.checkpoint`), naming that directory. A resumed run reads the shards onto however
many processes it has (DCP reshards them: two processes' checkpoint resumes in one and the
other way round). state.pt is replaced only once every shard is written, so a crash during a
save leaves the last complete checkpoint in force.

With dist.async_checkpoint, a periodic save copies the shards to host memory and writes them on
a thread (`dcp.async_save`, on a process group of its own so its collectives never interleave
with the training's) while the next steps run; the next save, and the run's last, wait for it.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as torch_dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint.metadata import StorageMeta
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

from execrl.rl.files.safe_load import load_dcp_metadata
from execrl.rl.parallel import dist

PREFIX = "shards-"


@dataclass
class _Saving:
    """A save in flight: its future, and the state.pt to publish once it is done."""

    future: Future
    publish: Callable[[], None]


class ShardedCheckpoints:
    """The sharded saves of one run (what is in flight, the saving thread's process group)."""

    def __init__(self, background: bool) -> None:
        self.background = background
        self.saving: _Saving | None = None
        self.group: Any = None

    def save(self, directory: Path, step: int, learner: Any,
             publish: Callable[[str], None], last: bool) -> None:  # fmt: skip
        """Write the shards of `learner` at `step`, then `publish(shards directory name)`
        on every process (rank 0 writes state.pt). `last`: before returning."""
        self.finish()
        shards = directory / f"{PREFIX}{step}"
        if dist.rank() == 0:
            directory.mkdir(exist_ok=True)
            shutil.rmtree(shards, ignore_errors=True)  # a save of this step cut short
        dist.barrier()
        payload = _payload(learner)

        def done() -> None:
            publish(shards.name)
            if dist.rank() == 0:
                _prune(directory, keep=shards.name)

        if last or not self.background:
            dcp.save(payload, checkpoint_id=shards)
            done()
            return
        if self.group is None:  # made by every process at the same save
            self.group = torch_dist.new_group(backend="gloo")
        future = dcp.async_save(payload, checkpoint_id=shards, process_group=self.group)
        self.saving = _Saving(future, done)

    def finish(self) -> None:
        """Wait for the save in flight, if any, and publish it."""
        saving, self.saving = self.saving, None
        if saving is not None:
            saving.future.result()
            saving.publish()


def load_shards(directory: Path, learner: Any) -> None:
    """The policy, value head and optimizer of `learner` from the shards in `directory`,
    resharded onto this run's processes."""
    if not (directory / ".metadata").is_file():
        raise FileNotFoundError(
            f"--resume: {directory} holds no complete sharded checkpoint (no .metadata); the "
            "run was stopped while saving it: resume from a copy of an earlier run directory"
        )
    payload = _payload(learner)
    reader = _MetadataChecked(directory)
    reader.read_metadata()  # refused here, in one line, before torch's collectives wrap it
    dcp.load(payload, storage_reader=reader)
    set_state_dict(_modules(learner), learner.optimizer, model_state_dict=payload["model"],
                   optim_state_dict=payload["optimizer"])  # fmt: skip


class _MetadataChecked(FileSystemReader):
    """torch's reader, but `.metadata` (which it would `pickle.load`, running whatever the
    file names) read by `rl.files.safe_load`'s unpickler of DCP's own records; the shards' tensors
    are raw bytes, their other values torch loads weights-only."""

    def read_metadata(self, *args: Any, **kwargs: Any) -> Any:
        path = Path(self._get_metadata_path(kwargs.get("rank")))
        with self.fs.create_stream(path, "rb") as stream:
            metadata = load_dcp_metadata(path, stream.read())
        if getattr(metadata, "storage_meta", None) is None:
            metadata.storage_meta = StorageMeta()
        metadata.storage_meta.load_id = self.load_id
        return metadata


def _payload(learner: Any) -> dict[str, Any]:
    model, optimizer = get_state_dict(_modules(learner), learner.optimizer)
    return {"model": model, "optimizer": optimizer}


def _modules(learner: Any) -> torch.nn.Module:
    """What the optimizer trains, as one module (its keys: policy.*, value_head.*)."""
    modules = {"policy": learner.model}
    if learner.value_head is not None:
        modules["value_head"] = learner.value_head
    return torch.nn.ModuleDict(modules)


def _prune(directory: Path, keep: str) -> None:
    for old in directory.glob(f"{PREFIX}*"):
        if old.name != keep:
            shutil.rmtree(old, ignore_errors=True)
