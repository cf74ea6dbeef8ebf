"""A malformed frame closes the connection that sent it and no other.

Kafka's SocketServer closes a connection whose frame it cannot turn into a request (a bad size,
a header it cannot parse, an API or version it does not serve, a body that does not decode):
there is no way to answer it, as the response format depends on the request's version. Every
other connection, open before or after, is served as usual.
"""

from __future__ import annotations

import socket
import struct

import pytest

from harness.raw_client import RawClient
from harness.wire import protocol

from ._wire import API_VERSIONS, METADATA, Wire, advertised_versions

CLOSE_WAIT_S = 10.0
UNSUPPORTED = 0x7FFE  # an api version no broker serves


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def _metadata_frame(version: int, *, api_version: int | None = None,
                    junk_body: bool = False) -> bytes:
    frame = bytearray(protocol.encode_request(
        api_key=METADATA, api_version=version, correlation_id=7,
        client_id="kafka-harness-suites", body={"topics": None}))
    if api_version is not None:
        struct.pack_into(">h", frame, 6, api_version)
    if junk_body:
        header_end = 4 + 8 + 2 + len("kafka-harness-suites") + (1 if protocol.is_flexible(
            METADATA, version) else 0)
        frame[header_end:] = b"\xff\xfe\xfd\xfc" * 4  # an array of -16M entries, cut short
        struct.pack_into(">i", frame, 0, len(frame) - 4)
    return bytes(frame)


def _bad_frames(metadata_version: int) -> dict[str, bytes]:
    return {
        "garbage": b"\x00\x00\x00\x10" + bytes(range(0xF0, 0x100)),
        "negative-size": b"\xff\xff\xff\xf0" + b"\x00" * 16,
        "oversized": struct.pack(">i", 0x7FFFFFF0) + b"\x00" * 16,
        "truncated-header": _frame(b"\x00\x03"),
        "unknown-api-key": _frame(struct.pack(">hhih", 0x7F00, 0, 1, -1)),
        "unsupported-version": _metadata_frame(metadata_version, api_version=UNSUPPORTED),
        "undecodable-body": _metadata_frame(metadata_version, junk_body=True),
    }


BAD_FRAME_NAMES = sorted(_bad_frames(12))


def _sent_before_closing(sock: socket.socket, timeout: float = CLOSE_WAIT_S) -> bytes | None:
    """The bytes the broker sent on `sock` before closing it (EOF or reset) within `timeout`,
    or None if it kept the connection open."""
    sock.settimeout(timeout)
    received = bytearray()
    try:
        while chunk := sock.recv(4096):
            received += chunk
    except ConnectionError:
        return bytes(received)
    except TimeoutError:
        return None
    return bytes(received)


def _still_served(wire: Wire, client: RawClient) -> None:
    assert advertised_versions(client) == wire.advertised


def _address(wire: Wire) -> tuple[str, int]:
    host, _, port = wire.bootstrap_address.rpartition(":")
    return host, int(port)


@pytest.mark.parametrize("name", BAD_FRAME_NAMES)
def test_malformed_frame_closes_only_its_connection(wire: Wire, name: str) -> None:
    """A frame that is not a valid request closes its own connection; other connections are unaffected [Kafka SocketServer; protocol guide, Requests].

    Nothing is sent back on it first: there is no request to answer. Another connection
    opened before the bad frame, and a new one opened after, both go on being answered.
    """  # noqa: E501
    bystander = wire.connect()
    _still_served(wire, bystander)
    bad = socket.create_connection(_address(wire), timeout=CLOSE_WAIT_S)
    try:
        bad.sendall(_bad_frames(wire.version(METADATA))[name])
        sent = _sent_before_closing(bad)
        assert sent is not None, f"{name}: the broker kept the connection open"
        assert sent == b"", f"{name}: the broker answered {sent[:32].hex()} before closing"
    finally:
        bad.close()
    _still_served(wire, bystander)
    _still_served(wire, wire.connect())


def test_request_cut_short_by_the_client_leaves_the_broker_serving(wire: Wire) -> None:
    """A connection that ends in the middle of a frame is dropped without harm to other connections [Kafka SocketServer]."""  # noqa: E501
    bystander = wire.connect()
    frame = protocol.encode_request(api_key=API_VERSIONS, api_version=0, correlation_id=1,
                                    client_id="cut", body={})
    cut = socket.create_connection(_address(wire), timeout=CLOSE_WAIT_S)
    try:
        cut.sendall(frame[: len(frame) // 2])
        cut.shutdown(socket.SHUT_WR)
        sent = _sent_before_closing(cut)
        assert sent is not None, "the broker kept a half-closed, half-sent connection"
        assert sent == b"", f"the broker answered half a request: {sent[:32].hex()}"
    finally:
        cut.close()
    _still_served(wire, bystander)
    _still_served(wire, wire.connect())
