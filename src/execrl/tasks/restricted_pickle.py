"""Pickles from dataset files, read with an unpickler that builds plain built-in data only.

LiveCodeBench ships its private tests as base64(zlib(pickle(json string))). `pickle.loads` on a
downloaded file runs whatever the pickle names (`os.system` through `__reduce__`), so the
unpickler here resolves no global but a few plain built-in types, refuses persistent ids, caps
the decompressed size, and bounds the objects the pickle builds before it builds any, so a
hostile or corrupt record is an error, never code run or an exhausted memory.

Bytes alone do not bound memory: a reference to an object already built costs 2 bytes
(BINGET) and a pointer, a stack slot and list growth once loaded, about 36 bytes of memory per
byte, and an empty set costs 1 byte and over 200 bytes of memory. Every opcode builds or pushes
at most one object or reference, so the pickle's opcodes are counted first (`pickletools`
reads them without building anything): at most `MAX_PICKLE_OPS`, which bounds what the load
builds beside its strings and numbers, whose size is their bytes'.
"""

from __future__ import annotations

import base64
import binascii
import builtins
import io
import pickle
import pickletools
import re
import zlib
from typing import Any

# Built-in types a pickle may name: protocols below 4 name set and frozenset, and complex always
# goes through a global. Each is called only with the plain data the pickle itself holds (no
# bytes/bytearray: `bytes(10**12)` from a pickle would allocate a terabyte).
_ALLOWED = frozenset({"set", "frozenset", "complex"})
# Larger than the largest LiveCodeBench record we know of (tens of MiB), small enough that a
# zlib bomb cannot take the machine's memory.
MAX_DECOMPRESSED_BYTES = 1 << 30
# Opcodes a pickle may hold: LiveCodeBench's pickle one JSON string (a handful of opcodes);
# a million objects and references cost at most a few hundred MB.
MAX_PICKLE_OPS = 1_000_000


class UnsafePickle(ValueError):
    """A pickle that tries to build something other than plain built-in data."""


class PickleTooLarge(ValueError):
    """A pickle that would build more objects and references than `MAX_PICKLE_OPS`."""


def _latin1(text: Any, encoding: Any) -> bytes:
    """Protocols below 3 pickle bytes as `_codecs.encode(text, "latin1")`; nothing else."""
    if type(text) is not str or encoding != "latin1":
        raise UnsafePickle("the pickle calls _codecs.encode other than to make bytes")
    return text.encode("latin1")


def _empty_bytes(*args: Any) -> bytes:
    """Protocols below 3 pickle b"" as `bytes()`; `bytes(n)` would allocate n bytes."""
    if args:
        raise UnsafePickle("the pickle calls bytes with arguments")
    return b""


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if module == "__builtin__":  # Python 2's name, which protocols < 3 use
            module = "builtins"
        if module == "builtins" and name in _ALLOWED:
            return getattr(builtins, name)
        if (module, name) == ("_codecs", "encode"):
            return _latin1
        if (module, name) == ("builtins", "bytes"):
            return _empty_bytes
        raise UnsafePickle(f"the pickle names {module}.{name}; only plain built-in data is allowed")

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickle("the pickle uses a persistent id; only plain built-in data is allowed")


def plain_loads(data: bytes, max_ops: int = MAX_PICKLE_OPS) -> Any:
    """Unpickle `data`, admitting only plain built-in values, built by at most `max_ops`
    opcodes; UnsafePickle or ValueError else."""
    try:
        _count_ops(data, max_ops)
        return _PlainUnpickler(io.BytesIO(data)).load()
    except UnsafePickle:
        raise
    except (pickle.UnpicklingError, EOFError, TypeError, AttributeError, IndexError) as exc:
        raise ValueError(f"not a readable pickle ({type(exc).__name__}: {exc})") from None


def _count_ops(data: bytes, max_ops: int) -> None:
    """ValueError when the pickle has more than `max_ops` opcodes (before anything is built)."""
    try:
        for n, _ in enumerate(pickletools.genops(data), 1):
            if n > max_ops:
                raise PickleTooLarge(
                    f"the pickle builds more than {max_ops} objects and references; a plain "
                    "record needs far fewer"
                )
    except PickleTooLarge:
        raise
    except Exception as exc:  # noqa: BLE001 - genops' own errors on a corrupt stream
        raise ValueError(f"not a readable pickle ({type(exc).__name__}: {exc})") from None


def decompress_capped(data: bytes, limit: int = MAX_DECOMPRESSED_BYTES) -> bytes:
    """zlib-decompress at most `limit` bytes; more is an error (a bomb, or corrupt data)."""
    d = zlib.decompressobj()
    try:
        out = d.decompress(data, limit)
    except zlib.error as exc:
        raise ValueError(f"not valid zlib data ({exc})") from None
    if d.unconsumed_tail:
        raise ValueError(f"decompresses to more than {limit} bytes")
    if not d.eof:
        raise ValueError("the zlib stream is truncated")
    return out


def decode_b64_zlib_pickle(text: str) -> Any:
    """LiveCodeBench's private-test encoding: base64, then zlib, then a pickle (of a JSON
    string, in every release we know). Errors are ValueError (UnsafePickle for a pickle that
    names anything but plain built-in types, PickleTooLarge for one, or a JSON string in it,
    that would build more than `MAX_PICKLE_OPS` objects)."""
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as exc:
        raise ValueError(f"not valid base64 ({exc})") from None
    value = plain_loads(decompress_capped(raw))
    if isinstance(value, str):
        _count_json_values(value, MAX_PICKLE_OPS)
    return value


# A JSON string (skipped whole), or a character that starts a value or separates two.
_JSON_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[{,]')


def _count_json_values(text: str, max_values: int) -> None:
    """PickleTooLarge when the JSON text would build more than `max_values` containers and
    values: the text the pickle holds is parsed next, and `[[],[],...` costs 3 bytes a list of
    over 60 bytes, so its bytes bound its memory no better than a pickle's do."""
    n = 0
    for token in _JSON_TOKEN.finditer(text):
        n += token.group().startswith(("[", "{", ","))
        if n > max_values:
            raise PickleTooLarge(
                f"the pickled JSON builds more than {max_values} values; a plain record needs "
                "far fewer"
            )
