"""A blocking raw-protocol Kafka client on `harness.wire`, for conformance tests.

Real clients hide what the broker said (they retry, downgrade, translate errors); the suites
need the exact response of one request at one version, and sometimes need to send bytes no
client would. This client does both and nothing else.
"""

from __future__ import annotations

import socket
import struct
import uuid
from collections.abc import Mapping
from typing import Any

from harness.wire import protocol

_SIZE = struct.Struct(">i")
_API_VERSIONS = 18


class RawClient:
    def __init__(self, host: str, port: int, *, timeout: float = 10.0,
                 client_id: str = "kafka-harness-raw") -> None:
        self._sock = socket.create_connection((host, port), timeout=timeout)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._client_id = client_id
        self._correlation = 0

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, api_key: int, version: int, body: Mapping[str, Any] | Any) -> int:
        """Send one request; returns its correlation id."""
        self._correlation += 1
        frame = protocol.encode_request(api_key=api_key, api_version=version,
                                        correlation_id=self._correlation,
                                        client_id=self._client_id, body=body)
        self._sock.sendall(frame)
        return self._correlation

    def send_raw(self, data: bytes) -> None:
        self._sock.sendall(data)

    def receive_frame(self) -> bytes:
        """One response frame without its size prefix; ConnectionError if the broker closed."""
        (size,) = _SIZE.unpack(self._read_exactly(4))
        return self._read_exactly(size)

    def receive(self, api_key: int, version: int) -> tuple[int, Any]:
        return protocol.decode_response(api_key, version, self.receive_frame())

    def request(self, api_key: int, version: int, body: Mapping[str, Any] | Any) -> Any:
        correlation = self.send(api_key, version, body)
        got, response = self.receive(api_key, version)
        if got != correlation:
            raise AssertionError(f"correlation id {got} answered request {correlation}")
        return response

    def advertised(self, version: int = 0) -> dict[int, tuple[int, int]]:
        """api key -> (min, max) as the broker advertises them in ApiVersions ``version``;
        RuntimeError if it answers with an error."""
        response = self.request(_API_VERSIONS, version, {
            "client_software_name": "kafka-harness", "client_software_version": "1.0"})
        error = int(response.error_code)
        if error != 0:
            raise RuntimeError(f"ApiVersions v{version} answered {protocol.error_name(error)}")
        return {int(k.api_key): (k.min_version, k.max_version) for k in response.api_keys}

    def is_closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True when the broker closed this connection (EOF or reset) within `timeout`."""
        self._sock.settimeout(timeout)
        try:
            return self._sock.recv(1) == b""
        except ConnectionError:
            return True
        except TimeoutError:
            return False

    def _read_exactly(self, size: int) -> bytes:
        chunks = []
        remaining = size
        while remaining:
            chunk = self._sock.recv(min(remaining, 1 << 20))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)


class RawClients:
    """Raw connections opened on demand — to ``bootstrap`` (the first address of a bootstrap
    list) or to any ``host:port`` — and closed together, so a test leaves none open."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap.split(",")[0]
        self._made: list[RawClient] = []

    def __call__(self, address: str | None = None, **options: Any) -> RawClient:
        host, _, port = (address or self.bootstrap).rpartition(":")
        client = RawClient(host, int(port), **options)
        self._made.append(client)
        return client

    def close(self) -> None:
        for client in self._made:
            client.close()
        self._made.clear()


METADATA_API_KEY = 3
METADATA_VERSION = 12  # Kafka 3.9 and 4 both serve it; topics by name


def raw_metadata(host: str, port: int, topics: list[str] | None, *, timeout: float,
                 client_id: str = "kafka-harness") -> Any:
    """One broker's own Metadata answer for `topics` (an empty list: only the brokers; None:
    every topic), never letting it auto-create what is asked about. A raw request rather than
    a Kafka client: a client asks whichever broker it likes, and librdkafka's admin client let
    Kafka 4 create a topic it was only asked about."""
    with RawClient(host, port, timeout=timeout, client_id=client_id) as client:
        return client.request(METADATA_API_KEY, METADATA_VERSION, {
            "topics": None if topics is None else [
                {"name": topic, "topic_id": uuid.UUID(int=0)} for topic in topics],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        })
