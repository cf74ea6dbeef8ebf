"""Correlation ids and response order on one connection."""

from __future__ import annotations

import struct
import time
from collections.abc import Callable

from harness.wire import protocol
from harness.wire.records import build_batch

from ._wire import (
    API_VERSIONS,
    API_VERSIONS_BODY,
    FETCH,
    METADATA,
    PRODUCE,
    Wire,
)

_I32 = struct.Struct(">i")
PARKED_MS = 10_000


def test_correlation_id_is_echoed_verbatim(wire: Wire) -> None:
    """A response carries the correlation id of its request unchanged, whatever its value [protocol guide, Request header]."""  # noqa: E501
    version = wire.version(API_VERSIONS)
    client = wire.connect()
    for correlation in (0, 1, 2**31 - 1, -1, -(2**31), 0x5A5A5A5A):
        client.send_raw(protocol.encode_request(
            api_key=API_VERSIONS, api_version=version, correlation_id=correlation,
            client_id="kafka-harness-suites", body=API_VERSIONS_BODY))
        frame = client.receive_frame()
        (echoed,) = _I32.unpack_from(frame, 0)
        assert echoed == correlation


def test_pipelined_requests_are_answered_in_order(wire: Wire,
                                                  new_topic: Callable[..., str]) -> None:
    """A broker answers the requests of one connection in the order it received them [protocol guide, Network: ordering].

    A Fetch that waits (max_wait) goes first and cheap requests follow on the same connection
    before any answer is read; the cheap ones are ready long before the Fetch, yet must come
    back after it, in order, each with its own correlation id.
    """  # noqa: E501
    topic = new_topic(1, exact=False)
    leader = wire.leader(topic)
    fetch_version, fetch_body = wire.fetch_request(topic, 0, max_wait=300, min_bytes=1)
    metadata_version = wire.version(METADATA)
    versions = wire.version(API_VERSIONS)
    sent = [(FETCH, fetch_version, leader.send(FETCH, fetch_version, fetch_body))]
    for _ in range(3):
        sent.append((METADATA, metadata_version, leader.send(
            METADATA, metadata_version, {"topics": [{"name": topic}],
                                         "allow_auto_topic_creation": False})))
        sent.append((API_VERSIONS, versions,
                     leader.send(API_VERSIONS, versions, API_VERSIONS_BODY)))
    received = [leader.receive(api_key, version)[0] for api_key, version, _ in sent]
    assert received == [correlation for _, _, correlation in sent]


def test_connections_are_ordered_independently(wire: Wire,
                                               new_topic: Callable[..., str]) -> None:
    """A request waiting on one connection does not hold back the answers of another [protocol guide, Network: ordering].

    Ordering is per connection: while a Fetch is parked for up to its max_wait, a Metadata
    request on a second connection to the same broker is answered at once; a record produced
    through that second connection then completes the Fetch.
    """  # noqa: E501
    topic = new_topic(1, exact=False)
    leader = wire.leader(topic)
    fetch_version, fetch_body = wire.fetch_request(topic, 0, max_wait=PARKED_MS, min_bytes=1)
    waiting = leader.send(FETCH, fetch_version, fetch_body)
    other = wire.connect(wire.leader_address(topic))
    started = time.monotonic()
    other.request(METADATA, wire.version(METADATA), {"topics": [{"name": topic}],
                                                     "allow_auto_topic_creation": False})
    elapsed = time.monotonic() - started
    assert elapsed < PARKED_MS / 2000, f"Metadata on another connection took {elapsed:.1f} s"
    produce_version, produce_body = wire.produce_request(topic, build_batch([(None, b"wake")]))
    other.request(PRODUCE, produce_version, produce_body)
    answered, _ = leader.receive(FETCH, fetch_version)
    assert answered == waiting

