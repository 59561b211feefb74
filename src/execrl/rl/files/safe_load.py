"""Loading files that may come from elsewhere without running code: the one rule for every loader.

A run directory is handed around (downloaded, sent, copied from a cluster), and `--resume` reads
what is in it. A pickle runs whatever callable it names while it loads, so every checkpoint
file is read by an unpickler that builds data only, and one that names anything else is
refused with a one-line error naming the file (`UnsafeFile`; exit 2 from the CLI):

- `checkpoint/state.pt` (`execrl train`'s and `execrl sft`'s): torch's weights-only unpickler,
  which builds tensors and plain containers; the sampler's and both RNGs' states are plain
  numbers, tuples and dicts, so it needs no allow-list (`load_weights`).
- `checkpoint/prefetched-<s>.pt` (an asynchronous run's batches gathered ahead): the same
  unpickler, allowed execrl's own records too (`execrl_records`: the dataclasses and enums of the
  execrl modules loaded, never a class the file names that is not already one of them, never
  a function). A record is data: building one runs its generated `__init__` and checks.
- an FSDP run's `shards-<s>/.metadata`, which torch's `FileSystemReader` reads with a bare
  `pickle.load`: `MetadataUnpickler`, which finds only the classes torch writes there
  (`rl.parallel.dist_checkpoint` reads the metadata through it).

A digest stored beside a file would not help: whoever can replace the file can replace the
digest. What the file may name is decided here, in code the file cannot change.
"""

from __future__ import annotations

import dataclasses
import enum
import io
import pickle
import sys
from pathlib import Path
from typing import Any

import torch


class UnsafeFile(ValueError):
    """A checkpoint file that names code to run, or objects no checkpoint holds; said for a
    person on one line: the file, why, what to do."""


def refused(path: Path, error: BaseException) -> UnsafeFile:
    # torch's message is a page of advice (one option: load it unsafely); its reason is the
    # line after "WeightsUnpickler error:", up to the first sentence
    text = str(error)
    reason = text.split("WeightsUnpickler error:")[-1].strip().split("\n")[0]
    detail = reason.split(". ")[0][:160] or type(error).__name__
    return UnsafeFile(
        f"{path}: refused: not a checkpoint as execrl writes it ({detail}); loading it "
        "could run code. Resume only a run directory execrl wrote, as it was saved, or start "
        "a new run"
    )


def load_weights(path: Path, map_location: Any = None, records: bool = False) -> Any:
    """`torch.load(path)` that builds tensors and plain data only; `records`: execrl's own
    records too (`execrl_records`). Anything else in the file is an `UnsafeFile` naming it."""
    try:
        if not records:
            return torch.load(path, map_location=map_location, weights_only=True)
        with torch.serialization.safe_globals(execrl_records()):
            return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as error:
        raise refused(path, error) from None


def execrl_records() -> list[type]:
    """The dataclasses and enums defined in the execrl modules already imported (an allowed
    name is looked up, never imported: the file cannot make a module load), and `frozenset`
    (a flag set)."""
    found: list[type] = [frozenset]
    for name, module in list(sys.modules.items()):
        if not name.startswith("execrl.") or module is None:
            continue
        for value in list(vars(module).values()):
            if isinstance(value, type) and value.__module__ == name and _is_record(value):
                found.append(value)
    return found


def _is_record(cls: type) -> bool:
    return dataclasses.is_dataclass(cls) or issubclass(cls, enum.Enum)


# What torch's FileSystemWriter pickles into `.metadata`: its metadata records, the storage
# indexes, a path, a tensor's size, dtype, layout and memory format.
_METADATA_MODULE = "torch.distributed.checkpoint.metadata"
_METADATA_CLASSES = ("Metadata", "StorageMeta", "MetadataIndex", "TensorStorageMetadata",
                     "BytesStorageMetadata", "ChunkStorageMetadata", "TensorProperties",
                     "_MEM_FORMAT_ENCODING")  # fmt: skip
_METADATA_NAMES = {(_METADATA_MODULE, name) for name in _METADATA_CLASSES} | {
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
    ("torch", "Size"),
    ("torch.serialization", "_get_layout"),
    ("pathlib", "PosixPath"),
    ("pathlib", "PurePosixPath"),
    ("collections", "OrderedDict"),
}


class MetadataUnpickler(pickle.Unpickler):
    """Reads a DCP `.metadata` file: finds only the names above and torch's dtypes."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _METADATA_NAMES:
            return super().find_class(module, name)
        if module == "torch" and isinstance(getattr(torch, name, None), torch.dtype):
            return getattr(torch, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not a sharded checkpoint's metadata")


def load_dcp_metadata(path: Path, data: bytes) -> Any:
    """The `Metadata` pickled in `data` (the bytes of `path`), or an `UnsafeFile` naming it."""
    try:
        return MetadataUnpickler(io.BytesIO(data)).load()
    except (pickle.UnpicklingError, EOFError) as error:
        raise refused(path, error) from None
