"""Replica fetchers: a follower copies its leaders' logs, one fetcher per leader broker.

Each fetcher is one asyncio task with one connection to its leader. A partition joins a
fetcher *truncating*: before copying anything, the follower asks the leader where the
follower's latest leader epoch ends in the leader's log (OffsetsForLeaderEpoch, KIP-101/279)
and cuts its own log there, so a replica that led an abandoned epoch drops the records nobody
else has instead of keeping a divergent history. Truncating to the high watermark — what Kafka
did before leader epochs — is only the fallback when the leader cannot answer by epoch.

Then the fetcher sends Fetch with its broker id as replica_id, appends what comes back with
the leader's offsets and epochs, and takes the leader's high watermark (bounded by its own
log end) as its own. The offset it fetches at is what tells the leader how far it has got.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.wire.errors import ErrorCode, error_name
from reference_broker.cluster.partition import Partition
from reference_broker.log import log_dir_failure
from reference_broker.log.errors import UnexpectedAppendOffset
from reference_broker.network.broker_client import BrokerClient, BrokerClientError
from reference_broker.network.tasks import cancel_and_wait

log = logging.getLogger("reference_broker.server.fetcher")

FETCH, FETCH_VERSION = 1, 12
OFFSET_FOR_LEADER_EPOCH, OFFSET_FOR_LEADER_EPOCH_VERSION = 23, 4
UNDEFINED = -1

TopicPartition = tuple[str, int]
AddressOf = Callable[[int], tuple[str, int] | None]


@dataclass
class _FetchState:
    partition: Partition
    truncating: bool = True
    delayed_until: float = 0.0


@dataclass
class ReplicaFetcher:
    """Copies every partition this broker follows from one leader."""

    leader_id: int
    broker_id: int
    config: Any
    address_of: AddressOf
    partitions: dict[TopicPartition, _FetchState] = field(default_factory=dict)
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task | None = None
    client: BrokerClient | None = None

    def add(self, partition: Partition) -> None:
        self.partitions[(partition.topic, partition.partition)] = _FetchState(partition)
        self.wakeup.set()

    def remove(self, key: TopicPartition) -> None:
        self.partitions.pop(key, None)

    async def run(self) -> None:
        backoff_s = self.config["replica.fetch.backoff.ms"] / 1000
        loop = asyncio.get_running_loop()
        while True:
            now = loop.time()
            ready = {k: s for k, s in self.partitions.items() if s.delayed_until <= now}
            if not ready:
                self.wakeup.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.wakeup.wait(), backoff_s or 0.1)
                continue
            client = self._client()
            if client is None:
                await asyncio.sleep(backoff_s)
                continue
            try:
                truncating = {k: s for k, s in ready.items() if s.truncating}
                if truncating:
                    await self._truncate(client, truncating)
                fetching = {k: s for k, s in ready.items()
                            if not s.truncating and k in self.partitions}
                if fetching:
                    await self._fetch(client, fetching)
            except BrokerClientError as exc:
                log.info("Fetcher for leader %d: %s; retrying in %.1fs", self.leader_id, exc,
                         backoff_s)
                await asyncio.sleep(backoff_s)
            except OSError as exc:  # appending to a log: a failed disk halts the broker
                if not log_dir_failure.handle(exc, f"fetching from leader {self.leader_id}"):
                    raise

    def _client(self) -> BrokerClient | None:
        address = self.address_of(self.leader_id)
        if address is None:
            return None
        if self.client is None:
            self.client = BrokerClient(
                *address, client_id=f"broker-{self.broker_id}-fetcher-{self.leader_id}",
                request_timeout_s=self.config["replica.socket.timeout.ms"] / 1000)
        else:
            self.client.set_address(*address)
        return self.client

    # --- truncation -----------------------------------------------------------------------------

    async def _truncate(self, client: BrokerClient, states: dict[TopicPartition, _FetchState]
                        ) -> None:
        asks: dict[TopicPartition, int] = {}
        for key, state in states.items():
            latest = state.partition.log.latest_epoch
            if latest is None:
                # Nothing with an epoch locally: at most the unreplicated tail can diverge.
                self._truncate_to(state, state.partition.high_watermark, "no leader epochs")
                continue
            asks[key] = latest
        if not asks:
            return
        topics: dict[str, list[dict]] = {}
        for (topic, index), epoch in asks.items():
            topics.setdefault(topic, []).append({
                "partition": index,
                "current_leader_epoch": states[(topic, index)].partition.leader_epoch,
                "leader_epoch": epoch})
        response = await client.request(OFFSET_FOR_LEADER_EPOCH, OFFSET_FOR_LEADER_EPOCH_VERSION, {
            "replica_id": self.broker_id,
            "topics": [{"topic": t, "partitions": p} for t, p in topics.items()]})
        for topic in response.topics:
            for p in topic.partitions:
                key = (topic.topic, p.partition)
                current = self.partitions.get(key)
                if current is None or key not in asks:
                    continue
                if p.error_code is not ErrorCode.none:
                    self._back_off(current,
                                   f"OffsetsForLeaderEpoch answered {error_name(p.error_code)}")
                    continue
                self._truncate_by_epoch(current, asks[key], p.leader_epoch, p.end_offset)

    def _truncate_by_epoch(self, state: _FetchState, asked: int, leader_epoch: int,
                           end_offset: int) -> None:
        log_ = state.partition.log
        if leader_epoch == UNDEFINED or end_offset == UNDEFINED:
            self._truncate_to(state, state.partition.high_watermark,
                              "the leader knows no epoch this old")
            return
        target = end_offset
        if leader_epoch < asked:
            # KIP-279: the leader never had our latest epoch; cut where our copy of the
            # leader's epoch ends, if that is earlier.
            own_epoch, own_end = log_.end_offset_for_epoch(leader_epoch)
            if own_epoch == leader_epoch:
                target = min(target, own_end)
        self._truncate_to(state, min(target, log_.log_end_offset),
                          f"epoch {leader_epoch} ends at {end_offset} on the leader")

    def _truncate_to(self, state: _FetchState, offset: int, why: str) -> None:
        partition = state.partition
        if offset < partition.log.log_end_offset:
            log.info("Truncating %s from %d to %d (%s)", partition, partition.log.log_end_offset,
                     offset, why)
            partition.truncate_to(offset)
        state.truncating = False

    # --- fetching -------------------------------------------------------------------------------

    async def _fetch(self, client: BrokerClient, states: dict[TopicPartition, _FetchState]
                     ) -> None:
        config = self.config
        topics: dict[str, list[dict]] = {}
        for (topic, index), state in states.items():
            topics.setdefault(topic, []).append({
                "partition": index,
                "current_leader_epoch": state.partition.leader_epoch,
                "fetch_offset": state.partition.log.log_end_offset,
                "last_fetched_epoch": -1,
                "log_start_offset": state.partition.log.log_start_offset,
                "partition_max_bytes": config["replica.fetch.max.bytes"]})
        response = await client.request(FETCH, FETCH_VERSION, {
            "replica_id": self.broker_id,
            "max_wait": config["replica.fetch.wait.max.ms"],
            "min_bytes": config["replica.fetch.min.bytes"],
            "max_bytes": max(config["replica.fetch.max.bytes"], 1 << 20) * 10,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": t, "partitions": p} for t, p in topics.items()],
            "forgotten_topics_data": [], "rack_id": ""})
        for topic in response.responses:
            for p in topic.partitions:
                key = (topic.topic, p.partition_index)
                current = self.partitions.get(key)
                if current is None or current is not states.get(key) or current.truncating:
                    continue  # removed or reset while the fetch was in flight
                self._process(current, p)

    def _process(self, state: _FetchState, p: Any) -> None:
        partition = state.partition
        error = p.error_code
        if error is ErrorCode.none:
            records = p.records
            if records:
                try:
                    partition.log.append_as_follower(records)
                except UnexpectedAppendOffset:
                    state.truncating = True
                    return
            partition.log.maybe_increment_log_start_offset(p.log_start_offset)
            partition.update_follower_high_watermark(p.high_watermark)
        elif error is ErrorCode.offset_out_of_range:
            log_ = partition.log
            if log_.log_end_offset < p.log_start_offset:
                log.info("%s is behind the leader's log start %d; starting over there",
                         partition, p.log_start_offset)
                partition.truncate_fully_and_start_at(p.log_start_offset)
            else:
                state.truncating = True
        else:
            self._back_off(state, f"Fetch answered {error_name(error)}")

    def _back_off(self, state: _FetchState, why: str) -> None:
        log.info("Fetching %s from leader %d paused: %s", state.partition, self.leader_id, why)
        state.delayed_until = asyncio.get_running_loop().time() + \
            self.config["replica.fetch.backoff.ms"] / 1000


class ReplicaFetcherManager:
    """One ReplicaFetcher per leader; partitions move between them as leadership changes."""

    def __init__(self, broker_id: int, config: Any, address_of: AddressOf) -> None:
        self._broker_id = broker_id
        self._config = config
        self._address_of = address_of
        self._fetchers: dict[int, ReplicaFetcher] = {}

    def add_partition(self, partition: Partition) -> None:
        fetcher = self._fetchers.get(partition.leader_id)
        if fetcher is None:
            fetcher = ReplicaFetcher(partition.leader_id, self._broker_id, self._config,
                                     self._address_of)
            fetcher.task = asyncio.get_running_loop().create_task(fetcher.run())
            self._fetchers[partition.leader_id] = fetcher
        fetcher.add(partition)

    def remove_partitions(self, keys: list[TopicPartition]) -> None:
        for fetcher in self._fetchers.values():
            for key in keys:
                fetcher.remove(key)

    def fetching(self) -> dict[TopicPartition, int]:
        """Which leader each followed partition is fetched from (for tests and logs)."""
        return {key: f.leader_id for f in self._fetchers.values() for key in f.partitions}

    async def shutdown(self) -> None:
        fetchers = list(self._fetchers.values())
        self._fetchers.clear()
        for fetcher in fetchers:
            await cancel_and_wait(fetcher.task)
            if fetcher.client is not None:
                await fetcher.client.close()
