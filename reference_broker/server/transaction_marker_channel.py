"""Kafka's TransactionMarkerChannelManager: the transaction coordinator's way to have each
partition's leader write a transaction's commit or abort marker.

For every partition of a prepared transaction the channel looks up the partition's leader in
the metadata cache (kept fresh by the controller's UpdateMetadata) and sends it WriteTxnMarkers
v1 through a broker-to-broker client, one request per leader. Partitions answered NONE are
done; those answered NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION or another retriable
error, those whose leader is unknown or unreachable, are tried again after a back-off with the
metadata as it is then — until every marker is written, as in Kafka, where a transaction never
completes without its markers. A partition whose topic no longer exists needs no marker. A
marker whose coordinator epoch or producer epoch the leader refuses as stale is given up: a
newer coordinator (or producer epoch) owns the transaction now.

The coordinator sends to this broker the same way (its own address), as Kafka's channel does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

from harness.wire.errors import ErrorCode, error_name
from reference_broker.network.broker_client import BrokerClient, BrokerClientError
from reference_broker.server.metadata_cache import MetadataCache

log = logging.getLogger("reference_broker.server.transaction_markers")

WRITE_TXN_MARKERS = 27
WRITE_TXN_MARKERS_VERSION = 1
TopicPartition = tuple[str, int]
AddressOf = Callable[[int], tuple[str, int] | None]

# Answers after which the marker is not sent again: another coordinator or producer epoch
# now owns the transaction (Kafka's channel drops these the same way).
_GIVE_UP = frozenset({ErrorCode.transaction_coordinator_fenced,
                      ErrorCode.invalid_producer_epoch, ErrorCode.producer_fenced})


class TransactionMarkerChannelManager:
    def __init__(self, broker_id: int, cache: MetadataCache, address_of: AddressOf,
                 coordinator_epoch_of: Callable[[str], int], *, request_timeout_s: float = 30.0,
                 retry_backoff_s: float = 0.1) -> None:
        self._broker_id = broker_id
        self._cache = cache
        self._address_of = address_of
        self._coordinator_epoch_of = coordinator_epoch_of
        self._request_timeout_s = request_timeout_s
        self._retry_backoff_s = retry_backoff_s
        self._clients: dict[int, BrokerClient] = {}

    async def write_markers(self, transactional_id: str, producer_id: int, producer_epoch: int,
                            commit: bool, partitions: frozenset[TopicPartition]) -> None:
        remaining = set(partitions)
        while True:
            remaining = {tp for tp in remaining if self._cache.topic(tp[0]) is not None}
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in sorted(remaining):
                info = self._cache.partition(*tp)
                if info is not None and info.leader >= 0:
                    by_leader.setdefault(info.leader, []).append(tp)
            marker = {"producer_id": producer_id, "producer_epoch": producer_epoch,
                      "transaction_result": commit,
                      "coordinator_epoch": self._coordinator_epoch_of(transactional_id)}
            sent = await asyncio.gather(*(self._send(leader, marker, tps)
                                          for leader, tps in by_leader.items()))
            for done in sent:
                remaining -= done
            if not remaining:
                return
            log.debug("Markers of %s (producer %d) still to write: %s", transactional_id,
                      producer_id, sorted(remaining))
            await asyncio.sleep(self._retry_backoff_s)

    async def _send(self, leader: int, marker: Mapping[str, object],
                    partitions: list[TopicPartition]) -> set[TopicPartition]:
        """The partitions the leader is done with: written, or refused for good."""
        client = self.client_for(leader)
        if client is None:
            return set()
        topics: dict[str, list[int]] = {}
        for topic, partition in partitions:
            topics.setdefault(topic, []).append(partition)
        body = {"markers": [{**marker, "topics": [
            {"name": name, "partition_indexes": ids} for name, ids in topics.items()]}]}
        try:
            response = await client.request(WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION, body)
        except BrokerClientError as exc:
            log.info("WriteTxnMarkers to broker %d failed: %s", leader, exc)
            return set()
        done: set[TopicPartition] = set()
        for result in response.markers:
            for topic in result.topics:
                for p in topic.partitions:
                    error = ErrorCode(int(p.error_code))
                    if error is ErrorCode.none or error in _GIVE_UP:
                        if error is not ErrorCode.none:
                            log.warning("Broker %d refused the marker for %s-%d: %s", leader,
                                        topic.name, p.partition_index, error_name(error))
                        done.add((topic.name, p.partition_index))
        return done

    def client_for(self, broker_id: int) -> BrokerClient | None:
        """The client to a broker at its current address (shared with KIP-890's verification,
        whose requests go to the same peers)."""
        address = self._address_of(broker_id)
        if address is None:
            return None
        client = self._clients.get(broker_id)
        if client is None:
            client = self._clients[broker_id] = BrokerClient(
                *address, client_id=f"broker-{self._broker_id}-txn-marker-sender",
                request_timeout_s=self._request_timeout_s)
        else:
            client.set_address(*address)
        return client

    async def shutdown(self) -> None:
        for client in self._clients.values():
            await client.close()
        self._clients.clear()
