"""A GGUF file's header, read within bounds its own size sets, before anything else reads it.

The `gguf` package's reader (and transformers, which uses it) keeps one numpy object per
metadata array element: about 200 bytes of memory per byte of file, before any check. This
reader keeps none: numeric arrays are skipped by their byte count, string arrays walked by their
lengths, and only scalars, strings and array lengths are kept. Every count and length is checked
against the bytes left in the file before it is used, so a 38 KB file cannot declare an array of
2**40 elements, and arrays are capped so that what transformers later builds from the same
header stays bounded.

Layout (GGUF v2/v3, little-endian): magic, version u32, tensor count u64, key count u64; the
keys (string key, u32 type, value); the tensor table (string name, u32 dims, u64 each dim in
ggml order, u32 ggml type, u64 offset into the data); the data, from the next multiple of
`general.alignment` (32 by default).
"""

from __future__ import annotations

import math
import mmap
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

MAGIC = b"GGUF"
_VERSIONS = (2, 3)  # v1 counted in 32 bits; neither transformers nor llama.cpp writes it now
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
            10: "<Q", 11: "<q", 12: "<d"}  # fmt: skip
_STRING, _ARRAY = 8, 9
_MAX_DIMS = 4  # GGML_MAX_DIMS
_MAX_KEY = 65535  # the GGUF specification's limit on a key's length
# A vocabulary's arrays (tokens, scores, types, merges) are the only big ones in real files:
# 151,936 entries in Qwen2.5, 262,144 in Gemma 3. The caps leave several times that, and bound
# the per-element objects transformers builds from a file that passed (~200 bytes each).
VOCAB_ARRAY_CAP = 1 << 20
ARRAY_CAP = 1 << 16  # any other array: per-layer head counts, rope sections
TOTAL_ARRAY_CAP = 1 << 22
TENSOR_CAP = 1 << 16  # a 70B Llama has 723 tensors; MoE files with split experts a few thousand


class GgufFormatError(ValueError):
    """The file is not a well-formed GGUF file within the bounds above (the message says why)."""


@dataclass(frozen=True, slots=True)
class TensorInfo:
    name: str
    dims: tuple[int, ...]  # ggml order: the fastest-moving dimension first
    ggml_type: int
    offset: int  # from the start of the data section
    nbytes: int

    @property
    def numel(self) -> int:
        return math.prod(self.dims)


@dataclass(frozen=True, slots=True)
class GgufHeader:
    version: int
    fields: dict[str, int | float | bool | str]  # scalar and string metadata
    arrays: dict[str, int]  # array metadata: its length only
    tensors: tuple[TensorInfo, ...]
    data_start: int
    file_size: int

    @property
    def architecture(self) -> str:
        value = self.fields.get("general.architecture")
        if not isinstance(value, str):
            raise GgufFormatError("its metadata has no general.architecture string")
        return value


class _Cursor:
    """Reads from a memory map, refusing any read past the end of the file."""

    def __init__(self, data: mmap.mmap, size: int) -> None:
        self.data, self.size, self.pos = data, size, 0

    def left(self) -> int:
        return self.size - self.pos

    def skip(self, n: int, what: str) -> None:
        if n > self.left():
            raise GgufFormatError(
                f"{what} needs {n} bytes at offset {self.pos}, but the file ends "
                f"{self.left()} bytes later (truncated, or a count that is not true)"
            )
        self.pos += n

    def unpack(self, fmt: str, what: str) -> tuple:
        start = self.pos
        self.skip(struct.calcsize(fmt), what)
        return struct.unpack_from(fmt, self.data, start)

    def u32(self, what: str) -> int:
        return int(self.unpack("<I", what)[0])

    def u64(self, what: str) -> int:
        return int(self.unpack("<Q", what)[0])

    def string(self, what: str) -> str:
        length = self.u64(what)
        start = self.pos
        self.skip(length, what)
        try:
            return bytes(self.data[start : self.pos]).decode("utf-8")
        except UnicodeDecodeError:
            raise GgufFormatError(f"{what} at offset {start} is not UTF-8") from None


def read_header(f: BinaryIO) -> GgufHeader:
    """The header of the open GGUF file f; GgufFormatError for any damage or implausible count."""
    size = f.seek(0, 2)
    if size < 24:
        raise GgufFormatError(f"it is {size} bytes, shorter than a GGUF header")
    with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        cursor = _Cursor(data, size)
        magic = cursor.unpack("<4s", "the magic")[0]
        if magic != MAGIC:
            raise GgufFormatError("it does not start with 'GGUF'")
        version = cursor.u32("the version")
        if version not in _VERSIONS:
            raise GgufFormatError(f"it is GGUF version {version}; execrl reads versions 2 and 3")
        n_tensors, n_keys = cursor.u64("the tensor count"), cursor.u64("the key count")
        if n_tensors > min(TENSOR_CAP, cursor.left() // 24):  # 24: the smallest tensor entry
            raise GgufFormatError(f"it declares {n_tensors} tensors, more than it can hold")
        if n_keys > cursor.left() // 13:  # 13: the smallest key entry (empty key, one byte)
            raise GgufFormatError(f"it declares {n_keys} metadata keys, more than it can hold")
        fields, arrays = _read_metadata(cursor, n_keys)
        tensors = _read_tensor_table(cursor, n_tensors)
    alignment = fields.get("general.alignment", 32)
    if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
        raise GgufFormatError(f"its general.alignment {alignment!r} is not a power of two")
    data_start = -(-cursor.pos // alignment) * alignment
    for t in tensors:
        end = data_start + t.offset + t.nbytes
        if end > size:
            raise GgufFormatError(
                f"tensor {t.name} ({t.nbytes} bytes at data offset {t.offset}) ends at byte "
                f"{end}, past the end of the file ({size} bytes): it is truncated"
            )
    return GgufHeader(version, fields, arrays, tensors, data_start, size)


def _read_metadata(
    cursor: _Cursor, n_keys: int
) -> tuple[dict[str, int | float | bool | str], dict[str, int]]:
    fields: dict[str, int | float | bool | str] = {}
    arrays: dict[str, int] = {}
    total = 0
    for _ in range(n_keys):
        key = cursor.string("a metadata key")
        if len(key) > _MAX_KEY or key in fields or key in arrays:
            raise GgufFormatError(f"metadata key {key[:80]!r} is too long or repeated")
        kind = cursor.u32(f"the type of {key}")
        if kind in _SCALARS:
            fields[key] = cursor.unpack(_SCALARS[kind], key)[0]
        elif kind == _STRING:
            fields[key] = cursor.string(key)
        elif kind == _ARRAY:
            arrays[key] = _skip_array(cursor, key)
            total += arrays[key]
            if total > TOTAL_ARRAY_CAP:
                raise GgufFormatError(
                    f"its metadata arrays hold more than {TOTAL_ARRAY_CAP} elements in all"
                )
        else:
            raise GgufFormatError(f"metadata {key} has type {kind}, which GGUF does not define")
    return fields, arrays


def _skip_array(cursor: _Cursor, key: str) -> int:
    """The array's length, the cursor moved past it: no object per element is made."""
    kind, count = cursor.u32(f"the element type of {key}"), cursor.u64(f"the length of {key}")
    cap = VOCAB_ARRAY_CAP if key.startswith("tokenizer.ggml.") else ARRAY_CAP
    if count > cap:
        raise GgufFormatError(f"metadata array {key} declares {count} elements (at most {cap})")
    if kind in _SCALARS:
        cursor.skip(count * struct.calcsize(_SCALARS[kind]), key)
    elif kind == _STRING:
        if count * 8 > cursor.left():
            raise GgufFormatError(f"metadata array {key} declares {count} strings, past the end")
        pos, data, size = cursor.pos, cursor.data, cursor.size
        for _ in range(count):  # a vocabulary: hundreds of thousands, so no calls per element
            if pos + 8 > size:
                raise GgufFormatError(f"metadata array {key}'s strings run past the end")
            pos += 8 + struct.unpack_from("<Q", data, pos)[0]
        if pos > size:
            raise GgufFormatError(f"metadata array {key}'s strings run past the end")
        cursor.pos = pos
    else:
        raise GgufFormatError(f"metadata array {key} has elements of type {kind} (not read)")
    return count


def _read_tensor_table(cursor: _Cursor, n_tensors: int) -> tuple[TensorInfo, ...]:
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    tensors: dict[str, TensorInfo] = {}
    for _ in range(n_tensors):
        name = cursor.string("a tensor name")
        n_dims = cursor.u32(f"the dimension count of tensor {name}")
        if name in tensors or n_dims > _MAX_DIMS:
            raise GgufFormatError(f"tensor {name[:80]!r} is repeated or has {n_dims} dimensions")
        dims = cursor.unpack(f"<{n_dims}Q", f"the shape of tensor {name}")
        ggml_type, offset = cursor.u32(f"the type of {name}"), cursor.u64(f"the offset of {name}")
        try:
            block, block_bytes = GGML_QUANT_SIZES[GGMLQuantizationType(ggml_type)]
        except (ValueError, KeyError):
            raise GgufFormatError(f"tensor {name} has ggml type {ggml_type}, unknown") from None
        numel = math.prod(dims)
        if dims and dims[0] % block:
            raise GgufFormatError(
                f"tensor {name}'s first dimension {dims[0]} is not a whole number of its "
                f"{block}-element blocks"
            )
        tensors[name] = TensorInfo(name, tuple(int(d) for d in dims), ggml_type, offset,
                                   numel // block * block_bytes)  # fmt: skip
    return tuple(tensors.values())


def read_header_of(path: Path) -> GgufHeader:
    with path.open("rb") as f:
        return read_header(f)
