"""Framing between the pool and its workers (a 4-byte big-endian length, then UTF-8 JSON), and
the sealed lines of the harness's channel to its worker (`seal`, `ChannelReader`)."""

from __future__ import annotations

import json
import struct
from _blake2 import blake2b
from _operator import _compare_digest

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


# A line of the harness's channel: a keyed BLAKE2b tag (hex) over the rest, then the message's
# sequence number, a space, and the message. The key is the run's and never leaves the harness,
# so a line the harness did not write, or wrote at another place in the sequence, fails its
# tag: a program that diverted the channel (fd 3) and read lines off it can neither forge nor
# reorder one, and dropping one breaks the sequence.
TAG_HEX = 32


def seal(key: bytes, seq: int, body: bytes) -> bytes:
    rest = b"%d " % seq + body
    return blake2b(rest, key=key, digest_size=TAG_HEX // 2).hexdigest().encode() + rest + b"\n"


class ChannelReader:
    """Reads the channel's sealed lines as they arrive, in order. The first line that is not the
    harness's next one ends the reading: nothing after it is believed (and a run with such a
    line does not pass), and the rest is counted, not parsed, so junk costs no objects."""

    def __init__(self, key: bytes) -> None:
        self.key = key
        self.events: list[dict[str, Any]] = []
        self.offset = 0  # where the next line starts
        self.broken = False
        # Whether a test's clock runs: from its "start" to the harness's "stop" (sent as the
        # call returns, before its value is carried out) or the next "start".
        self.clocked = False

    def feed(self, data: bytes | bytearray, final: bool = False) -> int:
        """Read the complete lines past what was read (with `final`, a last unended one too);
        return how many of the new events start or stop a test's clock (`clocked`)."""
        starts = 0
        while not self.broken and self.offset < len(data):
            end = data.find(b"\n", self.offset)
            if end < 0 and not final:
                break
            stop = end if end >= 0 else len(data)
            event = self._open(bytes(data[self.offset : stop]))
            if event is None:
                self.broken = True
                break
            self.events.append(event)
            if event.get("t") in ("start", "stop"):
                starts += 1
                self.clocked = event["t"] == "start"
            self.offset = stop + 1
        return starts

    def forged(self, data: bytes | bytearray) -> int:
        """Lines from the first one that was not the harness's to the end."""
        if not self.broken:
            return 0
        tail = len(data) > self.offset and not data.endswith(b"\n")
        return data.count(b"\n", self.offset) + tail

    def _open(self, line: bytes) -> dict[str, Any] | None:
        tag, rest = line[:TAG_HEX], line[TAG_HEX:]
        expected = blake2b(rest, key=self.key, digest_size=TAG_HEX // 2).hexdigest().encode()
        if not _compare_digest(tag, expected):
            return None
        seq, _, body = rest.partition(b" ")
        if seq != b"%d" % len(self.events):
            return None
        try:
            event = loads(body)
        except ValueError:
            return None
        return event if isinstance(event, dict) else None
