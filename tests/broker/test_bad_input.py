"""Bad frames close only their own connection; the broker keeps serving everyone else."""

import socket
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.raw_client import RawClient
from harness.wire import protocol
from harness.wire.records import build_batch
from tests import kafka_api_versions

METADATA, API_VERSIONS, PRODUCE = 3, 18, 0


def _alive(broker) -> bool:
    with RawClient(broker.host, broker.port) as client:
        return client.request(API_VERSIONS, 3, {"client_software_name": "t",
                                                "client_software_version": "1"}).error_code == 0


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


BAD_FRAMES = {
    "negative size": b"\xff\xff\xff\xf0",
    "oversized": struct.pack(">i", 200 * 1024 * 1024),
    "truncated header": _frame(b"\x00\x03"),
    "unknown api key": _frame(b"\x03\xe7\x00\x00\x00\x00\x00\x01\x00\x00"),
    "unsupported version": _frame(b"\x00\x03\x00\x63\x00\x00\x00\x01\x00\x00"),
    "garbage body": _frame(b"\x00\x03\x00\x0c\x00\x00\x00\x01\xff\xff" + b"\xfe" * 30),
}


@pytest.mark.parametrize("name", sorted(BAD_FRAMES))
def test_bad_frame_closes_only_that_connection(broker, name):
    with RawClient(broker.host, broker.port) as good, RawClient(broker.host, broker.port) as bad:
        bad.send_raw(BAD_FRAMES[name])
        assert bad.is_closed_by_peer(), f"{name}: the broker kept the connection open"
        response = good.request(METADATA, 12, {"topics": None})
        assert response.brokers[0].port == broker.port
    log_text = broker.log_path.read_text()
    assert "Closing connection from 127.0.0.1:" in log_text


def test_request_cut_short_by_disconnect_is_harmless(broker):
    sock = socket.create_connection((broker.host, broker.port))
    sock.sendall(struct.pack(">i", 100) + b"\x00\x03")
    sock.close()
    assert _alive(broker)


def test_unsupported_api_versions_version_gets_kip511_answer(broker):
    with RawClient(broker.host, broker.port) as client:
        header = struct.pack(">hhih", API_VERSIONS, 99, 42, -1)
        client.send_raw(_frame(header + b"\x00\x00\x00"))
        correlation, body = client.receive(API_VERSIONS, 0)
        assert correlation == 42
        assert body.error_code.value == 35  # UNSUPPORTED_VERSION
        keys = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
        # The same ranges as a valid ApiVersions: Kafka 3.9's (tests/kafka_api_versions.py).
        assert keys == kafka_api_versions.expected_reference_ranges(zookeeper_mode=False)
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


class _Connection:
    """One socket reused across examples, replaced whenever the broker closes it."""

    def __init__(self, broker):
        self.broker = broker
        self.sock = None
        self.reconnects = 0

    def send(self, data: bytes) -> None:
        self._send(data)
        declared = struct.unpack(">i", data[:4])[0] if len(data) >= 4 else -1
        if declared >= 0 and declared + 4 > len(data) and self.sock is not None:
            # A frame cut short would swallow every later example as its body: hang up, which
            # is itself the "truncated request" case, and go on with a fresh connection.
            self.sock.close()
            self.sock = None

    def _send(self, data: bytes) -> None:
        for _ in range(2):
            if self.sock is None:
                self.sock = socket.create_connection((self.broker.host, self.broker.port))
                self.sock.setblocking(False)
                self.reconnects += 1
            try:
                self._drain()
                self.sock.sendall(data)
                return
            except (BlockingIOError, ConnectionError, OSError):
                self.sock.close()
                self.sock = None

    def _drain(self) -> None:
        while True:
            try:
                chunk = self.sock.recv(65536)
            except BlockingIOError:
                return
            if not chunk:
                raise ConnectionError("closed")


def test_ten_thousand_hostile_frames_then_a_normal_client(broker):
    conn = _Connection(broker)
    count = 0

    @settings(max_examples=10_000, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(hostile_frames())
    def send_one(frame):
        nonlocal count
        conn.send(frame)
        count += 1

    send_one()
    if conn.sock is not None:
        conn.sock.close()
    assert count >= 10_000
    assert conn.reconnects > 10  # hostile frames really did get connections closed
    assert _alive(broker)
    with RawClient(broker.host, broker.port) as client:
        metadata = client.request(METADATA, 12, {"topics": None})
        assert metadata.brokers[0].node_id == 0
