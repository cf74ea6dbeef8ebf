"""Sans-IO framing: split a byte stream into Kafka frames (4-byte big-endian size + payload)."""

from __future__ import annotations

import struct

from .protocol import ProtocolError

_SIZE = struct.Struct(">i")


class FrameDecoder:
    """Accumulates received bytes and hands back complete frames, enforcing the size limit.

    A negative size or one above `max_size` (Kafka's socket.request.max.bytes) is a
    ProtocolError: the peer is either broken or hostile and the connection must close.
    """

    def __init__(self, max_size: int) -> None:
        self._max_size = max_size
        self._buffer = bytearray()
        self._expected = -1

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def feed(self, data: bytes) -> list[bytes]:
        self._buffer += data
        frames: list[bytes] = []
        buffer = self._buffer
        pos = 0
        end = len(buffer)
        while True:
            if self._expected < 0:
                if end - pos < 4:
                    break
                (size,) = _SIZE.unpack_from(buffer, pos)
                if size < 0:
                    raise ProtocolError(f"negative frame size {size}")
                if size > self._max_size:
                    raise ProtocolError(
                        f"frame size {size} exceeds socket.request.max.bytes {self._max_size}"
                    )
                pos += 4
                self._expected = size
            if end - pos < self._expected:
                break
            frames.append(bytes(buffer[pos : pos + self._expected]))
            pos += self._expected
            self._expected = -1
        if pos:
            del buffer[:pos]
        return frames

    def pending_partial(self) -> bool:
        """True when the stream stopped inside a frame (a truncated request on close)."""
        return bool(self._buffer) or self._expected >= 0
