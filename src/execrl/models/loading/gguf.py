"""A GGUF model file as a Hugging Face directory: dequantised once, cached by the file's hash.

transformers reads GGUF (with the `gguf` package) but dequantises on every load, and the model
it gives refuses `save_pretrained` ("quantized with gguf and is not serializable"). So execrl
converts once: the tokenizer (with its chat template) and the model from the file, then the same
architecture rebuilt from the config without its quantization_config, the weights copied in
(identical logits), and both saved as safetensors under
`$EXECRL_CACHE_DIR/models/gguf-<sha256 prefix>` (default `~/.cache/execrl`). The directory is
written under a temporary name and renamed, so an interrupted conversion leaves no cache that
looks complete; the key is the content, so a renamed or moved copy reuses it. What is converted
is a private copy hashed as it was copied (one read), so the key is always the hash of the bytes
converted. Before transformers reads the file, `gguf_header` reads its header within bounds and
`gguf_check` checks that its tensors are the model it declares.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from execrl.models.loading.gguf_check import ClaimError, check_blocks, check_claims
from execrl.models.loading.gguf_header import (
    MAGIC,
    GgufFormatError,
    GgufHeader,
    read_header,
)

CONVERSION_FILE = "execrl_gguf.json"  # provenance, beside the converted weights
CONVERTER_VERSION = 1  # part of the key: a changed conversion never reuses an old cache
# Architectures transformers reads from GGUF whose models are not causal LMs.
_NOT_CAUSAL = {"t5", "umt5"}


class ModelFileError(FileNotFoundError):
    """The model a user named cannot be used as it is (not fetched, not a readable GGUF file).

    A FileNotFoundError so that every command reports it as it reports a model path that does
    not exist: one line, exit status 2."""


def is_gguf(path: Path) -> bool:
    """Whether path names a GGUF file: by its suffix, or by its first four bytes."""
    if path.suffix.lower() == ".gguf":
        return True
    try:
        with path.open("rb") as f:
            return f.read(4) == MAGIC
    except OSError:
        return False


def models_cache_dir() -> Path:
    """Where converted models live: `$EXECRL_CACHE_DIR/models` (default ~/.cache/execrl)."""
    from execrl.tasks.sources import cache_dir

    return cache_dir() / "models"


def converted_dir(sha256: str) -> Path:
    """The cache directory of the GGUF file whose content has this hash."""
    return models_cache_dir() / f"gguf-{sha256[:16]}-v{CONVERTER_VERSION}"


# The identity of a file as it was hashed -> its sha256: one load asks for the same file's
# directory for the tokenizer, the policy and the reference, and a multi-GB file takes seconds to
# hash each time. Only a lookup: what gets converted is always a private copy hashed as it was
# copied, so a file swapped after hashing can never be cached under the hash of another.
_HASHED: dict[tuple[int, ...], str] = {}


def _identity(stat: os.stat_result) -> tuple[int, ...]:
    # ctime cannot be set by the file's owner, and changes on rename, write and chmod.
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


def file_sha256(path: Path) -> str:
    with path.open("rb") as f:
        before = _identity(os.fstat(f.fileno()))
        if before not in _HASHED:
            digest = hashlib.sha256()
            copy_into(f, None, digest)
            if _identity(os.fstat(f.fileno())) != before:  # written while read: not kept
                return digest.hexdigest()
            _HASHED[before] = digest.hexdigest()
        return _HASHED[before]


def copy_into(src: BinaryIO, dst: BinaryIO | None, digest: Any, limit: int | None = None) -> int:
    """Copy src to dst (if given), hashing what is copied; the bytes copied. With a limit, stop
    after limit + 1 bytes: a source longer than it is refused without reading the rest."""
    done = 0
    while chunk := src.read(1 << 20 if limit is None else min(1 << 20, limit + 1 - done)):
        digest.update(chunk)
        if dst is not None:
            dst.write(chunk)
        done += len(chunk)
    return done


@contextmanager
def private_dir() -> Iterator[Path]:
    """A directory only this user can write (mkdtemp's 0700), beside the cache (a model is too
    big for a RAM-backed /tmp); removed afterwards."""
    models_cache_dir().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".private-", dir=models_cache_dir()) as tmp:
        yield Path(tmp)


def ensure_converted(path: str | Path, log: Any = None, source: str = "") -> Path:
    """The Hugging Face directory of a GGUF file, converting it on first use.

    source: where the file came from, for the provenance record (default: its path).
    ModelFileError, naming the file and what to do, for a file that is not a complete GGUF
    file, is not the model it declares, or holds an architecture transformers cannot load."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ModelFileError(f"model file {path} does not exist")
    directory = converted_dir(file_sha256(path))
    if (directory / "config.json").is_file():
        return directory
    with private_dir() as private, path.open("rb") as src:
        copy = private / "model.gguf"
        digest = hashlib.sha256()
        with copy.open("wb") as dst:
            copy_into(src, dst, digest)
        return convert_private(copy, digest.hexdigest(), source or str(path), log)


def convert_private(private: Path, sha256: str, source: str, log: Any = None) -> Path:
    """Convert `private`, a file in a `private_dir` whose content hashed to sha256 as it was
    written there: so the cache under that hash holds the conversion of exactly those bytes.
    source: what the file is to the user (its path, the wheels it came from), in messages."""
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    directory = converted_dir(sha256)
    if (directory / "config.json").is_file():
        return directory
    header = check_gguf(private, source)
    start = time.time()
    log(f"execrl: converting {source} ({header.architecture}) to {directory} (first use only)")
    staging = Path(tempfile.mkdtemp(prefix=".converting-", dir=directory.parent))
    try:
        n_params = _convert(private, staging, source, header)
        provenance = {
            "source": source,
            "sha256": sha256,
            "architecture": header.architecture,
            "n_params": n_params,
            "converter_version": CONVERTER_VERSION,
            "seconds": round(time.time() - start, 1),
        }
        (staging / CONVERSION_FILE).write_text(json.dumps(provenance, indent=2))
        staging.chmod(0o755)  # mkdtemp's 0700 would hide the model from other users
        staging.rename(directory)  # atomic: a half-written conversion is never visible
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        if not (directory / "config.json").is_file():  # else another process finished first
            raise
    except (ValueError, KeyError, TypeError, NotImplementedError) as e:  # what the file holds
        shutil.rmtree(staging, ignore_errors=True)
        raise ModelFileError(
            f"model file {source}: transformers could not convert it ({type(e).__name__}: {e}); "
            "convert the model to a Hugging Face directory with its own tools and give that"
        ) from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    log(f"execrl: {source} ready ({n_params / 1e6:.2f}M parameters, {time.time() - start:.0f}s)")
    return directory


_DAMAGED = "download it again (for a known model: execrl models get NAME)"


def check_gguf(path: Path, source: str = "") -> GgufHeader:
    """The file's header, after checking (within bounds its size sets) that it parses, that its
    tensors lie inside it, that every declared block has tensors, and that transformers can
    load its architecture as a causal LM. source: the file as named in messages."""
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    shown = source or str(path)
    with path.open("rb") as f:
        if f.read(4) != MAGIC:
            raise ModelFileError(
                f"model file {shown} is not a GGUF file (it does not start with 'GGUF'); "
                "give a .gguf file or a directory in Hugging Face format"
            )
        try:
            header = read_header(f)
            architecture = header.architecture
            check_blocks(header)
        except (GgufFormatError, ClaimError) as e:
            raise ModelFileError(f"model file {shown} is damaged or not what it claims: {e}; "
                                 f"{_DAMAGED}") from None  # fmt: skip
    if not header.tensors:
        raise ModelFileError(f"model file {shown} holds no tensors; {_DAMAGED}")
    supported = sorted(set(GGUF_SUPPORTED_ARCHITECTURES) - {"general", "tokenizer"} - _NOT_CAUSAL)
    if architecture not in supported:
        raise ModelFileError(
            f"model file {shown} holds a {architecture!r} model, which execrl cannot load from "
            f"GGUF (it can: {', '.join(supported)}); give a directory in Hugging Face format "
            "for that model instead"
        )
    return header


def _convert(path: Path, directory: Path, source: str, header: GgufHeader) -> int:
    """Save the file's tokenizer and its dequantised model in directory; the parameter count.

    The declared model is checked against the file's tensors before it is built, and the built
    one for weights the file did not fill: transformers would leave those random, with a log."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    where = dict(pretrained_model_name_or_path=path.parent, gguf_file=path.name)
    config = AutoConfig.from_pretrained(**where, local_files_only=True)  # read once, used twice
    try:
        check_claims(header, config)
    except ClaimError as e:
        raise ModelFileError(
            f"model file {source} is not what it claims: {e}; {_DAMAGED}"
        ) from None
    tokenizer = AutoTokenizer.from_pretrained(**where, local_files_only=True)
    loaded, info = AutoModelForCausalLM.from_pretrained(
        **where, config=config, dtype=torch.float32, local_files_only=True,
        output_loading_info=True,
    )  # fmt: skip
    unfilled = sorted(info["missing_keys"]) + [k for k, *_ in info["mismatched_keys"]]
    if unfilled:
        raise ModelFileError(
            f"model file {source} left {len(unfilled)} weights unfilled ({unfilled[0]}, ...) "
            f"when loaded: it is incomplete; {_DAMAGED}"
        )
    config = loaded.config
    del config.quantization_config  # the rebuilt model is plain float32, hence serialisable
    model = type(loaded)(config)
    model.load_state_dict(loaded.state_dict())
    model.generation_config = loaded.generation_config
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return sum(p.numel() for p in model.parameters())
