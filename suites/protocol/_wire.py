"""The protocol suite's view of a target: raw connections, negotiated versions and routing.

Every test here speaks the wire protocol itself (``harness.raw_client`` on ``harness.wire``), so
it needs what a real client does before its first request: the versions the target advertises
(ApiVersions, once per test), and the broker to send each request to — the partition leader for
Produce, Fetch and ListOffsets, the group coordinator for group APIs — or a multi-broker target
answers NOT_LEADER_OR_FOLLOWER / NOT_COORDINATOR instead of what the test checks.

:class:`Wire` is that view (conftest.py's ``wire`` fixture). Requests are written once as
version-independent dicts; ``harness.wire.protocol.build`` keeps the fields of the version sent.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from harness.raw_client import RawClient
from harness.waiting import wait_for
from harness.wire import protocol
from harness.wire.records import Record

from ._records import fetched_records

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
FIND_COORDINATOR, API_VERSIONS, INIT_PRODUCER_ID = 10, 18, 22

NONE, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE = 0, 14, 15
GROUP_KEY, TRANSACTION_KEY = 0, 1  # FindCoordinator key types
LEADER_WAIT_S = 15.0
FETCH_WAIT_MS = 500
ZERO_UUID = uuid.UUID(int=0)

API_VERSIONS_BODY = {"client_software_name": "kafka-harness-suites",
                     "client_software_version": "1.0"}


def advertised_versions(client: RawClient, version: int = 0) -> dict[int, tuple[int, int]]:
    """api_key -> (min, max) as the broker behind `client` advertises them."""
    return client.advertised(version)


def encodable_versions(advertised: dict[int, tuple[int, int]], api_key: int) -> list[int]:
    """The advertised versions of `api_key` that harness.wire can encode and decode."""
    if api_key not in advertised:
        return []
    low, high = advertised[api_key]
    return [v for v in protocol.modelled_versions(api_key) if low <= v <= high]


def fetch_body(topic: str, offset: int, *, partition: int = 0, max_wait: int = 0,
               min_bytes: int = 1, max_bytes: int = 1 << 20, topic_id: uuid.UUID = ZERO_UUID,
               isolation_level: int = 0) -> dict[str, Any]:
    return {"replica_id": -1, "max_wait": max_wait, "min_bytes": min_bytes,
            "max_bytes": max_bytes, "isolation_level": isolation_level, "session_id": 0,
            "session_epoch": -1, "topics": [{"topic": topic, "topic_id": topic_id, "partitions": [
                {"partition": partition, "fetch_offset": offset, "partition_max_bytes": max_bytes,
                 "current_leader_epoch": -1, "log_start_offset": -1,
                 "last_fetched_epoch": -1}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def produce_body(topic: str, batch: bytes, *, acks: int = -1, partition: int = 0,
                 topic_id: uuid.UUID = ZERO_UUID, timeout_ms: int = 10_000) -> dict[str, Any]:
    return {"transactional_id": None, "acks": acks, "timeout": timeout_ms, "topic_data": [
        {"name": topic, "topic_id": topic_id,
         "partition_data": [{"index": partition, "records": batch}]}]}


def list_offsets_body(topic: str, timestamp: int, partition: int = 0,
                      isolation_level: int = 0) -> dict[str, Any]:
    return {"replica_id": -1, "isolation_level": isolation_level, "timeout": 5000, "topics": [
        {"name": topic, "partitions": [{"partition_index": partition, "timestamp": timestamp,
                                        "current_leader_epoch": -1}]}]}


def timestamp_ms(value: Any) -> int:
    """A decoded timestamp field (tz-aware datetime, None for -1, or int) in milliseconds."""
    if value is None:
        return -1
    if isinstance(value, int):
        return value
    return round(value.timestamp() * 1000)


class Wire:
    """Raw connections to the target, with its advertised versions and request routing."""

    def __init__(self, make_client: Callable[..., RawClient], bootstrap_address: str) -> None:
        self._make_client = make_client
        self.bootstrap_address = bootstrap_address
        self._by_address: dict[str, RawClient] = {}
        self.bootstrap = make_client(bootstrap_address)
        self.advertised = advertised_versions(self.bootstrap)

    def connect(self, address: str | None = None) -> RawClient:
        """A new connection of the test's own (closed after the test)."""
        return self._make_client(address)

    def version(self, api_key: int, at_least: int = 0) -> int:
        """The highest version both sides speak; skips the test when there is none."""
        usable = [v for v in encodable_versions(self.advertised, api_key) if v >= at_least]
        if not usable:
            pytest.skip(f"the target advertises no version >= {at_least} of "
                        f"{protocol.api_name(api_key)} that harness.wire can encode "
                        f"(advertised: {self.advertised.get(api_key)})")
        return usable[-1]

    def _client_for(self, address: str) -> RawClient:
        if address not in self._by_address:
            self._by_address[address] = self._make_client(address)
        return self._by_address[address]

    def metadata(self, topic: str | None = None) -> Any:
        """Metadata for one topic (None: for no topic, only the brokers)."""
        topics = [] if topic is None else [{"name": topic, "topic_id": ZERO_UUID}]
        body = {"topics": topics,
                "allow_auto_topic_creation": False, "include_cluster_authorized_operations": False,
                "include_topic_authorized_operations": False}
        return self.bootstrap.request(METADATA, self.version(METADATA), body)

    def leader_address(self, topic: str, partition: int = 0) -> str:
        """host:port of the partition's leader, waiting (bounded) until it has one."""
        deadline = time.monotonic() + LEADER_WAIT_S
        while True:
            response = self.metadata(topic)
            brokers = {b.node_id: f"{b.host}:{b.port}" for b in response.brokers}
            (described,) = response.topics
            leaders = {p.partition_index: p.leader_id for p in described.partitions}
            leader = leaders.get(partition, -1)
            if described.error_code.value == NONE and leader in brokers:
                return brokers[leader]
            if time.monotonic() > deadline:
                raise AssertionError(f"{topic}-{partition} has no leader after {LEADER_WAIT_S} s:"
                                     f" {described}")
            time.sleep(0.1)

    def leader(self, topic: str, partition: int = 0) -> RawClient:
        """The test's shared connection to the partition's leader."""
        return self._client_for(self.leader_address(topic, partition))

    def wait_known_everywhere(self, topic: str) -> None:
        """Wait (bounded) until every broker's Metadata shows `topic` with all its leaders.

        Brokers learn of a new topic asynchronously; a request for it that reaches a broker
        which has not yet heard (UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION) is a race of
        the test's, not the finding it looks for.
        """
        deadline = time.monotonic() + LEADER_WAIT_S
        version = self.version(METADATA)
        body = {"topics": [{"name": topic, "topic_id": ZERO_UUID}],
                "allow_auto_topic_creation": False}
        for broker in self.metadata().brokers:
            client = self._client_for(f"{broker.host}:{broker.port}")
            while True:
                (described,) = client.request(METADATA, version, body).topics
                if described.error_code.value == NONE and described.partitions and all(
                        p.leader_id >= 0 for p in described.partitions):
                    break
                if time.monotonic() > deadline:
                    raise AssertionError(f"broker {broker.node_id} does not know {topic} after "
                                         f"{LEADER_WAIT_S} s: {described}")
                time.sleep(0.05)

    def controller(self) -> RawClient:
        """A connection to the controller Metadata names (where admin requests go)."""
        response = self.metadata()
        brokers = {b.node_id: f"{b.host}:{b.port}" for b in response.brokers}
        controller = getattr(response, "controller_id", -1)
        return self._client_for(brokers[controller]) if controller in brokers else self.bootstrap

    def topic_id(self, topic: str) -> uuid.UUID:
        return self.metadata(topic).topics[0].topic_id if self.version(METADATA) >= 10 \
            else ZERO_UUID

    def coordinator(self, key: str, key_type: int = GROUP_KEY) -> RawClient:
        """A connection to the coordinator of a group (or, with ``key_type``
        :data:`TRANSACTION_KEY`, of a transactional id), after a bounded wait while it is not
        available (Kafka creates its internal topic on the first lookup)."""
        version = self.version(FIND_COORDINATOR)
        deadline = time.monotonic() + LEADER_WAIT_S
        while True:
            response = self.bootstrap.request(FIND_COORDINATOR, version, {
                "key": key, "key_type": key_type, "coordinator_keys": [key]})
            found = response.coordinators[0] if version >= 4 else response
            if found.error_code.value == NONE:
                return self._client_for(f"{found.host}:{found.port}")
            if found.error_code.value != COORDINATOR_NOT_AVAILABLE or \
                    time.monotonic() > deadline:
                raise AssertionError(f"FindCoordinator({key}) answered {found}")
            time.sleep(0.1)

    def produce_request(self, topic: str, batch: bytes, **options: Any) -> tuple[int, dict]:
        """The version and body of a Produce the leader can serve (topic id from v13 on)."""
        version = self.version(PRODUCE)
        if version >= 13:
            options.setdefault("topic_id", self.topic_id(topic))
        return version, produce_body(topic, batch, **options)

    def produce(self, topic: str, batch: bytes, *, acks: int = -1, partition: int = 0) -> Any:
        """Produce one batch to the leader; the partition's response."""
        version, body = self.produce_request(topic, batch, acks=acks, partition=partition)
        response = self.leader(topic, partition).request(PRODUCE, version, body)
        return response.responses[0].partition_responses[0]

    def fetch_request(self, topic: str, offset: int, **options: Any) -> tuple[int, dict]:
        """The version and body of a Fetch the leader can serve (topic id from v13 on)."""
        version = self.version(FETCH)
        if version >= 13:
            options.setdefault("topic_id", self.topic_id(topic))
        return version, fetch_body(topic, offset, **options)

    def fetch(self, topic: str, offset: int, *, partition: int = 0, **options: Any) -> Any:
        """Fetch from the leader; the partition's response.

        As a consumer does, it waits up to FETCH_WAIT_MS for a first byte: a broker answers at
        once when data is there, and the suite's tests of max_wait itself set their own.
        """
        options.setdefault("max_wait", FETCH_WAIT_MS)
        version, body = self.fetch_request(topic, offset, partition=partition, **options)
        response = self.leader(topic, partition).request(FETCH, version, body)
        assert response.responses and response.responses[0].partitions, (
            f"Fetch v{version} of {topic}-{partition} answered no partition: {response}")
        return response.responses[0].partitions[0]

    def read_log(self, topic: str, end_offset: int, partition: int = 0) -> list[Record]:
        """Every record from offset 0 up to `end_offset`, fetching on from the last one read as
        a consumer does (a broker may answer fewer batches than fit; bounded in time)."""
        deadline = time.monotonic() + LEADER_WAIT_S
        records: list[Record] = []
        while True:
            next_offset = records[-1].offset + 1 if records else 0
            if next_offset >= end_offset:
                return records
            fetched = fetched_records(self.fetch(topic, next_offset, partition=partition).records)
            records += [r for r in fetched if r.offset >= next_offset]
            if time.monotonic() > deadline:
                raise AssertionError(f"read only up to offset {next_offset} of {topic}-"
                                     f"{partition} in {LEADER_WAIT_S} s, expected {end_offset}")

    def list_offset(self, topic: str, timestamp: int, partition: int = 0,
                    isolation_level: int = 0) -> Any:
        """ListOffsets for one timestamp (-1 latest, -2 earliest) at the leader; latest is the
        last stable offset with ``isolation_level`` 1 (read_committed, from v2 on)."""
        response = self.leader(topic, partition).request(
            LIST_OFFSETS, self.version(LIST_OFFSETS, at_least=2 if isolation_level else 1),
            list_offsets_body(topic, timestamp, partition, isolation_level))
        return response.topics[0].partitions[0]

    def init_producer_id(self) -> tuple[int, int]:
        """A fresh idempotent producer id and epoch.

        COORDINATOR_LOAD_IN_PROGRESS is retried, as clients do: Apache Kafka 3.9 answers it to
        the first InitProducerId after start-up while it fetches a block of producer ids."""
        def ask() -> Any:
            response = self.bootstrap.request(INIT_PRODUCER_ID, self.version(INIT_PRODUCER_ID), {
                "transactional_id": None, "transaction_timeout": 60_000, "producer_id": -1,
                "producer_epoch": -1})
            return None if response.error_code.value == COORDINATOR_LOAD_IN_PROGRESS else response

        response = wait_for(ask, LEADER_WAIT_S, "InitProducerId to be answered")
        assert response.error_code.value == NONE, f"InitProducerId: {response.error_code}"
        return response.producer_id, response.producer_epoch
