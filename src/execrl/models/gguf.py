"""A GGUF model file as a Hugging Face directory: dequantised once, cached by the file's hash.

transformers reads GGUF (with the `gguf` package) but dequantises on every load, and the model
it gives refuses `save_pretrained` ("quantized with gguf and is not serializable"). So execrl
converts once: the tokenizer (with its chat template) and the model from the file, then the same
architecture rebuilt from the config without its quantization_config, the weights copied in
(identical logits), and both saved as safetensors under
`$EXECRL_CACHE_DIR/models/gguf-<sha256 prefix>` (default `~/.cache/execrl`). The directory is
written under a temporary name and renamed, so an interrupted conversion leaves no cache that
looks complete; the key is the content, so a renamed or moved copy reuses it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MAGIC = b"GGUF"
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


# (resolved path, size, mtime_ns) -> sha256: one load asks for the same file's directory for the
# tokenizer, the policy and the reference, and a multi-GB file takes seconds to hash each time.
_HASHED: dict[tuple[str, int, int], str] = {}


def file_sha256(path: Path) -> str:
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _HASHED:
        digest = hashlib.sha256()
        with path.open("rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
        _HASHED[key] = digest.hexdigest()
    return _HASHED[key]


def ensure_converted(path: str | Path, log: Any = None, source: str = "") -> Path:
    """The Hugging Face directory of a GGUF file, converting it on first use.

    source: where the file came from, for the provenance record (default: its path).
    ModelFileError, naming the file and what to do, for a file that is not a complete GGUF
    file or holds an architecture transformers cannot load."""
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    path = Path(path).expanduser()
    if not path.is_file():
        raise ModelFileError(f"model file {path} does not exist")
    sha256 = file_sha256(path)
    directory = converted_dir(sha256)
    if (directory / "config.json").is_file():
        return directory
    architecture = check_gguf(path)
    start = time.time()
    log(f"execrl: converting {path} ({architecture}) to {directory} (first use only)")
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".converting-", dir=directory.parent))
    try:
        n_params = _convert(path, staging)
        provenance = {
            "source": source or str(path),
            "sha256": sha256,
            "architecture": architecture,
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
            f"model file {path}: transformers could not convert it ({type(e).__name__}: {e}); "
            "convert the model to a Hugging Face directory with its own tools and give that"
        ) from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    log(f"execrl: {path.name} ready ({n_params / 1e6:.2f}M parameters, {time.time() - start:.0f}s)")
    return directory


def check_gguf(path: Path) -> str:
    """The file's architecture, after checking that the whole file parses and that transformers
    can load that architecture as a causal LM."""
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    with path.open("rb") as f:
        if f.read(4) != MAGIC:
            raise ModelFileError(
                f"model file {path} is not a GGUF file (it does not start with 'GGUF'); "
                "give a .gguf file or a directory in Hugging Face format"
            )
    try:
        from gguf import GGUFReader
    except ImportError as e:
        raise ImportError(f"reading {path} needs the gguf package: pip install gguf") from e
    try:
        reader = GGUFReader(path)
        size = path.stat().st_size
        end = max((int(t.data_offset) + int(t.n_bytes) for t in reader.tensors), default=0)
        field = reader.fields["general.architecture"]
        architecture = bytes(field.parts[field.data[0]]).decode()  # as transformers reads it
    except Exception as e:  # noqa: BLE001 - any failure to parse is a damaged file
        raise ModelFileError(
            f"model file {path} cannot be read as GGUF ({type(e).__name__}: {e}); it is truncated "
            "or corrupt: download it again (for a known model: execrl models get NAME)"
        ) from None
    if end > size or not reader.tensors:
        raise ModelFileError(
            f"model file {path} is truncated ({size} bytes, its tensors need {end}); "
            "download it again (for a known model: execrl models get NAME)"
        )
    supported = sorted(set(GGUF_SUPPORTED_ARCHITECTURES) - {"general", "tokenizer"} - _NOT_CAUSAL)
    if architecture not in supported:
        raise ModelFileError(
            f"model file {path} holds a {architecture!r} model, which execrl cannot load from "
            f"GGUF (it can: {', '.join(supported)}); give a directory in Hugging Face format "
            "for that model instead"
        )
    return str(architecture)


def _convert(path: Path, directory: Path) -> int:
    """Save the file's tokenizer and its dequantised model in directory; the parameter count."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = dict(pretrained_model_name_or_path=path.parent, gguf_file=path.name)
    tokenizer = AutoTokenizer.from_pretrained(**source, local_files_only=True)
    loaded = AutoModelForCausalLM.from_pretrained(
        **source, dtype=torch.float32, local_files_only=True
    )
    config = loaded.config
    del config.quantization_config  # the rebuilt model is plain float32, hence serialisable
    model = type(loaded)(config)
    model.load_state_dict(loaded.state_dict())
    model.generation_config = loaded.generation_config
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return sum(p.numel() for p in model.parameters())
