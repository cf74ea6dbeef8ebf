"""Fetch v4+: delayed fetch (min_bytes / max_wait), byte limits, offsets and leader epochs.

Kafka answers a fetch as soon as `min_bytes` are readable or `max_wait` has passed; between,
the request is parked. Here the handler reads once, and if it is short of `min_bytes` starts
watching the replica manager's "new data" signal before it returns: the parked part runs as a
task from the next loop turn, and an append handled before then must still wake it. Each wake,
and the deadline, reads again.
A read_committed fetch (isolation level 1) reads to the last stable offset and lists the
aborted transactions overlapping it, from the segments' transaction indexes.
Incremental fetch sessions (KIP-227) are not offered: the response's session id 0 tells the
client to keep sending full fetch requests, which every client supports.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from harness.wire.errors import ErrorCode
from harness.wire.protocol import Deferred
from reference_broker.cluster.partition import IsolationLevel
from reference_broker.server.api_registry import api
from reference_broker.server.broker_services import BrokerServices

FETCH = 1
ZERO_UUID = uuid.UUID(int=0)
INVALID_SESSION_ID = 0


@api(FETCH, range(4, 18))  # Kafka 3.9: v0-v17; kio has no v0-v3
def handle_fetch(services: BrokerServices, request: Any, conn: Any) -> Any:
    body = request.body
    session_id = getattr(body, "session_id", 0)
    session_epoch = getattr(body, "session_epoch", -1)
    if session_id != INVALID_SESSION_ID and session_epoch > 0:
        return {"throttle_time": 0, "error_code": ErrorCode.fetch_session_id_not_found,
                "session_id": 0, "responses": []}
    result = _read_all(services, body)
    max_wait_s = body.max_wait.total_seconds()
    if result.ready(body.min_bytes) or max_wait_s <= 0:
        return result.response()
    from_follower = replica_id_of(body) >= 0
    watch = services.replica_manager.watch_data(result.keys, max_wait_s, from_follower)
    return _delayed(services, body, watch, max_wait_s, from_follower)


def replica_id_of(body: Any) -> int:
    """The fetching follower's broker id (v15+ moved it into replica_state); -1 for consumers."""
    state = getattr(body, "replica_state", None)
    if state is not None:
        return state.replica_id
    return getattr(body, "replica_id", -1)


async def _delayed(services: BrokerServices, body: Any, watch: asyncio.Future[None],
                   max_wait_s: float, from_follower: bool) -> dict[str, Any]:
    """Read again at each wake until `min_bytes` are there or the wait is over (Kafka's
    DelayedFetch reads at completion too, so an answer at the deadline is a fresh read)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max_wait_s
    while True:
        await watch
        result = _read_all(services, body)
        remaining = deadline - loop.time()
        if result.ready(body.min_bytes) or remaining <= 0:
            return result.response()
        watch = services.replica_manager.watch_data(result.keys, remaining, from_follower)


class _FetchResult:
    def __init__(self) -> None:
        self.topics: list[dict[str, Any]] = []
        self.keys: list[tuple[str, int]] = []
        self.total_bytes = 0
        self.has_error = False

    def ready(self, min_bytes: int) -> bool:
        return self.has_error or self.total_bytes >= min_bytes

    def response(self) -> dict[str, Any]:
        return {"throttle_time": 0, "error_code": ErrorCode.none,
                "session_id": INVALID_SESSION_ID, "responses": self.topics}


def _partition_error(index: int, error: ErrorCode) -> dict[str, Any]:
    """A partition answered with an error. Its records are empty, not null, as Kafka sends them
    (librdkafka refuses a null record set as "invalid MessageSetSize -1")."""
    return {"partition_index": index, "error_code": error, "high_watermark": -1,
            "last_stable_offset": -1, "log_start_offset": -1, "records": b"",
            "aborted_transactions": None, "preferred_read_replica": -1}


def _read_all(services: BrokerServices, body: Any) -> _FetchResult:
    cache = services.metadata_cache
    replicas = services.replica_manager
    out = _FetchResult()
    budget = body.max_bytes
    replica_id = replica_id_of(body)
    isolation = IsolationLevel.from_wire(getattr(body, "isolation_level", 0))
    # v11+ carries client metadata (a rack id): Kafka then lets a follower serve a consumer.
    follower_may_serve = replica_id < 0 and getattr(body, "rack_id", None) is not None
    for fetch_topic in body.topics:
        name = getattr(fetch_topic, "topic", None)
        topic_id = getattr(fetch_topic, "topic_id", None)
        topic = cache.topic(name) if name is not None else cache.topic_by_id(topic_id)
        partitions = []
        for fp in fetch_topic.partitions:
            if topic is None:
                out.has_error = True
                partitions.append(_partition_error(
                    fp.partition, ErrorCode.unknown_topic_or_partition if name is not None
                    else ErrorCode.unknown_topic_id))
                continue
            out.keys.append((topic.name, fp.partition))
            partitions.append(_read_partition(replicas, topic.name, fp, budget, out,
                                              replica_id, follower_may_serve, isolation))
            budget = max(body.max_bytes - out.total_bytes, 0)
        out.topics.append({"topic": name, "topic_id": topic_id or ZERO_UUID,
                           "partitions": partitions})
    return out


def _read_partition(replicas: Any, topic: str, fp: Any, budget: int,
                    out: _FetchResult, replica_id: int,
                    follower_may_serve: bool, isolation: IsolationLevel) -> dict[str, Any]:
    max_bytes = min(fp.partition_max_bytes, budget)
    error, read = replicas.read(topic, fp.partition, fp.fetch_offset, max_bytes,
                                min_one_batch=out.total_bytes == 0, replica_id=replica_id,
                                current_leader_epoch=getattr(fp, "current_leader_epoch", -1),
                                follower_may_serve=follower_may_serve, isolation=isolation)
    if error is ErrorCode.offset_out_of_range:
        out.has_error = True
        response = _partition_error(fp.partition, error)
        response.update(high_watermark=read.high_watermark,
                        last_stable_offset=read.last_stable_offset,
                        log_start_offset=read.log.log_start_offset)
        return response
    if error is not ErrorCode.none:
        out.has_error = True
        return _partition_error(fp.partition, error)
    records = b""
    if read.records is not None and read.records.total_size:
        # The socket layer sends these file regions with sendfile: no copy through Python.
        records = Deferred(read.records.regions)
        out.total_bytes += records.size
    return {"partition_index": fp.partition, "error_code": ErrorCode.none,
            "high_watermark": read.high_watermark, "last_stable_offset": read.last_stable_offset,
            "log_start_offset": read.log_start_offset,
            "aborted_transactions": _aborted(read.aborted_transactions),
            "preferred_read_replica": -1, "records": records}


def _aborted(found: Any) -> list[dict[str, int]] | None:
    """The response's list (null for read_uncommitted, as Kafka sends it)."""
    if found is None:
        return None
    return [{"producer_id": txn.producer_id, "first_offset": txn.first_offset} for txn in found]
