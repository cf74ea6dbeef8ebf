"""Bad frames close only their own connection; the broker keeps serving everyone else.

Every hostile frame goes out on a connection of its own, and the test reads what the broker does
with *that* connection: a frame it cannot process must be met with a close (EOF or reset) and not
one byte back. A witness connection, opened before any hostile frame and kept for the whole
test, must still get correct ApiVersions and Metadata answers after each one, and a fresh
connection must work at the end.
"""

from __future__ import annotations

import socket
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.conformance import hostile
from harness.raw_client import RawClient
from harness.waiting import wait_for
from harness.wire import protocol
from harness.wire.records import build_batch
from tests import kafka_api_versions

METADATA, API_VERSIONS, PRODUCE = 3, 18, 0
EXPECTED_RANGES = kafka_api_versions.expected_reference_ranges(zookeeper_mode=False)


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def _connect(broker) -> socket.socket:
    return hostile.connect(broker.host, broker.port)


def peer_name(sock: socket.socket) -> str:
    """How the broker names this connection's peer in its log."""
    host, port = sock.getsockname()[:2]
    return f"{host}:{port}"


def assert_serving(client: RawClient, broker) -> None:
    """Correct ApiVersions and Metadata answers on ``client``'s connection."""
    assert client.advertised(3) == EXPECTED_RANGES
    metadata = client.request(METADATA, 12, {"topics": None})
    assert [(b.node_id, b.host, b.port) for b in metadata.brokers] \
        == [(0, broker.host, broker.port)]


def log_says(broker, line: str) -> bool:
    return line in broker.log_path.read_text()


BAD_FRAMES = {  # name: (bytes, what the broker's log gives as the reason it closed)
    "negative size": (b"\xff\xff\xff\xf0", "negative frame size -16"),
    "oversized": (struct.pack(">i", 200 * 1024 * 1024),
                  "frame size 209715200 exceeds socket.request.max.bytes 104857600"),
    "truncated header": (_frame(b"\x00\x03"), "truncated request header (2 bytes)"),
    "unknown api key": (_frame(b"\x03\xe7\x00\x00\x00\x00\x00\x01\x00\x00"),
                        "unknown api key 999"),
    "unsupported version": (_frame(b"\x00\x03\x00\x63\x00\x00\x00\x01\x00\x00"),
                            "unsupported version 99 of metadata"),
    "garbage body": (_frame(b"\x00\x03\x00\x0c\x00\x00\x00\x01\xff\xff" + b"\xfe" * 30),
                     "malformed metadata v12 request"),
}


@pytest.mark.parametrize("name", sorted(BAD_FRAMES))
def test_bad_frame_closes_only_that_connection(broker, name):
    frame, reason = BAD_FRAMES[name]
    with RawClient(broker.host, broker.port) as witness:
        assert_serving(witness, broker)
        with _connect(broker) as bad:
            peer = peer_name(bad)
            hostile.send(bad, frame)
            assert hostile.read_until_closed(bad) == b"", \
                f"{name}: the broker answered before closing"
        # The broker logs the close, with its reason, before it closes: no wait needed.
        closing = f"Closing connection from {peer}: "
        reasons = [line.split(closing, 1)[1] for line in broker.log_path.read_text().splitlines()
                   if closing in line]
        assert len(reasons) == 1 and reasons[0].startswith(reason), reasons
        assert_serving(witness, broker)
    with RawClient(broker.host, broker.port) as fresh:
        assert_serving(fresh, broker)


def test_request_cut_short_by_disconnect_is_harmless(broker):
    with RawClient(broker.host, broker.port) as witness:
        with _connect(broker) as sock:
            peer = peer_name(sock)
            sock.sendall(struct.pack(">i", 100) + b"\x00\x03")
            assert_serving(witness, broker)  # the broker has had the bytes for a while now
            assert hostile.nothing_received_and_open(sock), \
                "a request cut short got an answer or a close"
        wait_for(lambda: log_says(broker, f"Connection from {peer} closed in the middle of a "
                                          "request"),
                 timeout=10, what="the broker to see the request cut short")
        assert_serving(witness, broker)
    with RawClient(broker.host, broker.port) as fresh:
        assert_serving(fresh, broker)


def test_unsupported_api_versions_version_gets_kip511_answer(broker):
    with RawClient(broker.host, broker.port) as client:
        header = struct.pack(">hhih", API_VERSIONS, 99, 42, -1)
        client.send_raw(_frame(header + b"\x00\x00\x00"))
        correlation, body = client.receive(API_VERSIONS, 0)
        assert correlation == 42
        assert body.error_code.value == 35  # UNSUPPORTED_VERSION
        keys = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
        # The same ranges as a valid ApiVersions: Kafka 3.9's (tests/kafka_api_versions.py).
        assert keys == EXPECTED_RANGES
        assert keys[API_VERSIONS] == kafka_api_versions.load()[API_VERSIONS]


def _valid_frames() -> list[bytes]:
    produce = {"acks": 1, "timeout": 1000, "topic_data": [
        {"name": "fuzz", "partition_data": [{"index": 0, "records": build_batch([(b"k", b"v")])}]}]}
    frames = [
        protocol.encode_request(api_key=METADATA, api_version=v, body={"topics": None})
        for v in (1, 9, 12)
    ]
    frames += [protocol.encode_request(api_key=PRODUCE, api_version=v, body=produce)
               for v in (3, 9)]
    frames.append(protocol.encode_request(api_key=API_VERSIONS, api_version=3, body={
        "client_software_name": "fuzz", "client_software_version": "1"}))
    return frames


VALID = _valid_frames()
@st.composite
def hostile_frames(draw):
    kind = draw(st.sampled_from(["random", "mutated", "resized"]))
    if kind == "random":
        return draw(st.binary(min_size=1, max_size=64))
    frame = bytearray(draw(st.sampled_from(VALID)))
    if kind == "resized":
        struct.pack_into(">i", frame, 0, draw(st.integers(-(2**31), 2**31 - 1)))
        return bytes(frame[: draw(st.integers(4, len(frame)))])
    for _ in range(draw(st.integers(1, 4))):
        pos = draw(st.integers(4, len(frame) - 1))
        frame[pos] = draw(st.integers(0, 255))
    return bytes(frame)


def check_one_hostile_frame(broker, witness: RawClient, data: bytes) -> hostile.Outcome:
    """``data`` on a connection of its own, judged by harness.conformance.hostile's rules, and
    the witness connection served meanwhile."""
    with _connect(broker) as sock:
        outcome = hostile.judge(sock, data)
        assert_serving(witness, broker)
        if outcome is hostile.Outcome.WAITING:
            # Still open, nothing sent: the broker waits for the rest of the frame.
            assert hostile.nothing_received_and_open(sock), \
                "a frame cut short got an answer or a close"
        return outcome


def test_ten_thousand_hostile_frames_then_a_normal_client(broker):
    outcomes: dict[str, int] = {}
    with RawClient(broker.host, broker.port) as witness:
        assert_serving(witness, broker)

        @settings(max_examples=10_000, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(hostile_frames())
        def send_one(frame):
            outcome = check_one_hostile_frame(broker, witness, frame).value
            outcomes[outcome] = outcomes.get(outcome, 0) + 1

        send_one()
    with RawClient(broker.host, broker.port) as fresh:
        assert_serving(fresh, broker)
    # Most random and resized prefixes are out of range: the broker really did close them.
    assert outcomes.get("closed", 0) > 1000, outcomes
