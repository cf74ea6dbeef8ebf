"""Hostile frames over a real socket, and what a broker must do with each.

The fuzzer (ci/fuzz) drives the reference broker's request path in-process; this module sends
such frames to any running broker — ours or Apache Kafka — each on a connection of its own,
and judges the broker by what that connection sees. Kafka's rule for a request it cannot
process is to close the connection without a word (a bad size prefix, an unknown API, a body
it cannot parse); a frame it *can* decode — a valid request, or a mutated one that still
parses — gets an answer under its correlation id, possibly with an error code. A frame cut
short leaves the broker waiting for the rest. Anything else — bytes before a close, a
response under the wrong correlation id, half a response, silence on an open connection — is
a :class:`Misbehaviour`.

Frames come from a seeded generator (:func:`frames`), so the same frames can be sent to two
brokers and the figures compared: random bytes, mutations of real requests, and real requests
with a rewritten size prefix.
"""

from __future__ import annotations

import contextlib
import enum
import random
import socket
import struct
import time
from collections.abc import Iterator, Sequence

from harness.wire import protocol

API_VERSIONS = 18
MAX_REQUEST_BYTES = 104_857_600  # socket.request.max.bytes, Kafka's default and ours
CLOSE_BOUND_S = 10.0  # generous: on loopback a broker closes within milliseconds
PROBE_CORRELATION = 0x7E57AB1E
# An ApiVersions v0 request sent after every complete frame: its answer shows the connection
# still open and in step even when the hostile frame happened to be a request without a
# response (an acks=0 Produce).
PROBE = protocol.encode_request(api_key=API_VERSIONS, api_version=0,
                                correlation_id=PROBE_CORRELATION, body={})


class Misbehaviour(AssertionError):
    """The broker did something with a frame that Kafka's rules do not allow."""


class Fate(enum.Enum):
    """What the size prefix alone decides a broker must do."""

    REFUSED = "refused"  # negative or above the limit: close
    INCOMPLETE = "incomplete"  # fewer bytes than declared: wait for the rest
    COMPLETE = "complete"  # decode it: answer if it can, close if it cannot


class Outcome(enum.Enum):
    """What the broker did."""

    CLOSED = "closed"
    ANSWERED = "answered"
    WAITING = "waiting"


def fate(data: bytes, max_request_bytes: int = MAX_REQUEST_BYTES) -> Fate:
    if len(data) < 4:
        return Fate.INCOMPLETE
    (declared,) = struct.unpack(">i", data[:4])
    if declared < 0 or declared > max_request_bytes:
        return Fate.REFUSED
    return Fate.COMPLETE if len(data) >= 4 + declared else Fate.INCOMPLETE


def connect(host: str, port: int) -> socket.socket:
    sock = socket.create_connection((host, port), timeout=CLOSE_BOUND_S)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def send(sock: socket.socket, data: bytes) -> None:
    """``sendall``, except that a reset or broken pipe is left for the reader to judge: it is
    acceptable only when the broker closed the connection, which the caller then checks by
    reading (a closed connection reads as EOF or a reset; an open one blocks)."""
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        sock.sendall(data)


def read_until_closed(sock: socket.socket, bound: float = CLOSE_BOUND_S) -> bytes:
    """Everything the broker sends until it closes the connection; Misbehaviour if it is still
    open ``bound`` seconds on."""
    received = bytearray()
    deadline = time.monotonic() + bound
    while True:
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return bytes(received)
        except TimeoutError:
            raise Misbehaviour(f"the broker kept the connection open for {bound:.0f}s "
                               f"(having sent {bytes(received)!r})") from None
        if not chunk:
            return bytes(received)
        received += chunk


def _read_or_close(sock: socket.socket, size: int) -> bytes | None:
    data = bytearray()
    sock.settimeout(CLOSE_BOUND_S)
    while len(data) < size:
        try:
            chunk = sock.recv(size - len(data))
        except ConnectionResetError:
            chunk = b""
        except TimeoutError:
            raise Misbehaviour(f"neither an answer nor a close within {CLOSE_BOUND_S:.0f}s "
                               f"(read {bytes(data)!r})") from None
        if not chunk:
            if data:
                raise Misbehaviour(f"the broker closed after sending part of a frame: "
                                   f"{bytes(data)!r}")
            return None
        data += chunk
    return bytes(data)


def read_frame_or_close(sock: socket.socket) -> bytes | None:
    """The next response frame (without its size), or None if the broker closed the
    connection before sending a byte; Misbehaviour if it closed in the middle of a frame."""
    header = _read_or_close(sock, 4)
    if header is None:
        return None
    (size,) = struct.unpack(">i", header)
    if not 4 <= size <= MAX_REQUEST_BYTES:
        raise Misbehaviour(f"a response frame of size {size}")
    body = _read_or_close(sock, size)
    if body is None:
        raise Misbehaviour("the broker closed the connection in the middle of a response")
    return body


def nothing_received_and_open(sock: socket.socket) -> bool:
    """True when the connection is open and the broker has sent nothing on it (so far)."""
    sock.setblocking(False)
    try:
        sock.recv(1)  # a byte, or EOF: either is a failure
    except BlockingIOError:
        return True
    except ConnectionResetError:
        return False
    finally:
        sock.settimeout(CLOSE_BOUND_S)
    return False


def judge(sock: socket.socket, data: bytes) -> Outcome:
    """Send ``data`` on ``sock`` (a connection of its own) and judge what the broker does."""
    decided = fate(data)
    if decided is Fate.REFUSED:
        send(sock, data)
        if read_until_closed(sock) != b"":
            raise Misbehaviour("the broker answered a frame it must refuse")
        return Outcome.CLOSED
    if decided is Fate.INCOMPLETE:
        send(sock, data)
        return Outcome.WAITING
    # Only the first frame: bytes past it would be a second frame, which the generator also
    # makes on its own.
    (declared,) = struct.unpack(">i", data[:4])
    send(sock, data[: 4 + declared] + PROBE)
    first = read_frame_or_close(sock)
    if first is None:
        return Outcome.CLOSED  # nothing sent back before the close
    responses = [first]
    if struct.unpack_from(">i", first)[0] != PROBE_CORRELATION:
        # The frame was a request the broker could decode: its answer comes first, under the
        # frame's own correlation id.
        if first[:4] != data[8:12]:
            raise Misbehaviour(f"an answer under correlation id {first[:4].hex()}, "
                               f"the frame's is {data[8:12].hex()}")
        second = read_frame_or_close(sock)
        if second is None:
            raise Misbehaviour("the broker answered the frame, then closed")
        responses.append(second)
    correlation, probe = protocol.decode_response(API_VERSIONS, 0, responses[-1])
    if correlation != PROBE_CORRELATION or probe.error_code.value != 0:
        raise Misbehaviour(f"the probe after the frame got {probe!r}")
    return Outcome.ANSWERED


def check_frame(host: str, port: int, data: bytes) -> Outcome:
    """``data`` on a connection of its own; a frame left waiting must have received nothing
    and still be open when the connection is dropped."""
    with connect(host, port) as sock:
        outcome = judge(sock, data)
        if outcome is Outcome.WAITING and not nothing_received_and_open(sock):
            raise Misbehaviour("a frame cut short got an answer or a close")
        return outcome


def frames(seed: int, count: int, originals: Sequence[bytes]) -> Iterator[bytes]:
    """``count`` hostile frames from ``seed``: a third random bytes (1-64), a third mutations
    of 1-4 bytes after the size prefix of one of ``originals`` (real request frames, size
    prefix included), a third ``originals`` with a random size prefix, cut at a random point."""
    if not originals:
        raise ValueError("frames needs at least one original request frame to mutate")
    rng = random.Random(seed)
    for _ in range(count):
        kind = rng.randrange(3)
        if kind == 0:
            yield rng.randbytes(rng.randint(1, 64))
            continue
        frame = bytearray(rng.choice(originals))
        if kind == 1 and len(frame) > 4:
            for _ in range(rng.randint(1, 4)):
                frame[rng.randrange(4, len(frame))] = rng.randrange(256)
            yield bytes(frame)
        else:
            struct.pack_into(">i", frame, 0, rng.randint(-(2**31), 2**31 - 1))
            yield bytes(frame[: rng.randint(4, len(frame))])
