"""Framing between the pool and its workers: a 4-byte big-endian length, then UTF-8 JSON."""

from __future__ import annotations

import json
import struct

TYPE_CHECKING = False  # typing stays out of the worker
if TYPE_CHECKING:
    from typing import Any, BinaryIO

MAX_FRAME = 1 << 30


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def loads(data: bytes) -> Any:
    return json.loads(data)


def frame(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


def write_message(stream: BinaryIO, obj: Any) -> None:
    view = memoryview(frame(dumps(obj)))
    while view:
        n = stream.write(view)
        view = view[n:]
    stream.flush()


def read_message(stream: BinaryIO) -> Any | None:
    """The next message, or None at a clean end of stream. A torn frame raises EOFError."""
    head = _read_exact(stream, 4)
    if head is None:
        return None
    (size,) = struct.unpack(">I", head)
    if size > MAX_FRAME:
        raise EOFError(f"frame of {size} bytes is over the {MAX_FRAME}-byte limit")
    body = _read_exact(stream, size)
    if body is None:
        raise EOFError("stream ended inside a frame")
    return loads(body)


def _read_exact(stream: BinaryIO, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        chunk = stream.read(n - got)
        if not chunk:
            if got == 0:
                return None
            raise EOFError("stream ended inside a frame")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)
