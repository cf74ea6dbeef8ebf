"""OffsetCommit v2-v9, TxnOffsetCommit v0-v4, OffsetFetch v1-v9 (multi-group from v8;
`require_stable` from v7 answers UNSTABLE_OFFSET_COMMIT for a partition a pending transaction
may change) and OffsetDelete v0.

TxnOffsetCommit (KIP-98, KIP-447's member and generation from v3) writes the offsets as the
producer's transactional batch in the group's offsets partition; they stay pending until the
transaction's marker reaches that partition (WriteTxnMarkers). Before writing, as Kafka 3.9
with KIP-890 part 1's verification, the producer's transaction coordinator must confirm that
the group's offsets partition is in the producer's ongoing transaction (AddOffsetsToTxn added
it): else the pending offsets would belong to no transaction the coordinator will end, and the
group's offsets would stay unstable for good. A refusal answers every partition.

Partitions the broker does not host are refused per partition (UNKNOWN_TOPIC_OR_PARTITION /
UNKNOWN_TOPIC_ID) before anything reaches the coordinator, which decides the rest. The handlers
also know v10's topic ids (Kafka 4), but the broker advertises Kafka 3.9's ranges, which end at
v9, so no client can send v10.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable
from typing import Any

from harness.wire.errors import ErrorCode
from reference_broker.coordinator.group.group_metadata import CommittedOffset, TopicPartition
from reference_broker.coordinator.group.offset_commits import OffsetToCommit
from reference_broker.server.api_registry import api
from reference_broker.server.apis.group_membership import in_connection_order, millis
from reference_broker.server.broker_services import BrokerServices
from reference_broker.server.offsets_topic import OFFSETS_TOPIC
from reference_broker.server.transaction_verification import for_txn_offset_commit

OFFSET_COMMIT = 8
TXN_OFFSET_COMMIT = 28
OFFSET_FETCH = 9
OFFSET_DELETE = 47
MULTI_GROUP_FETCH_VERSION = 8
TOP_LEVEL_FETCH_ERROR_VERSION = 2
ZERO_UUID = uuid.UUID(int=0)


def _resolve(services: BrokerServices, topic: Any) -> tuple[str | None, ErrorCode]:
    """(topic name, error for its partitions if unknown) from a name or a topic id."""
    cache = services.metadata_cache
    name = getattr(topic, "name", None)
    if name is not None:
        if cache.topic(name) is None:
            return name, ErrorCode.unknown_topic_or_partition
        return name, ErrorCode.none
    found = cache.topic_by_id(topic.topic_id)
    if found is None:
        return None, ErrorCode.unknown_topic_id
    return found.name, ErrorCode.none


def _hosted(services: BrokerServices, name: str | None, partition: int) -> bool:
    return name is not None and services.metadata_cache.partition(name, partition) is not None


@api(OFFSET_COMMIT, range(2, 10))  # Kafka 3.9: v0-v9; kio has no v0-v1
@in_connection_order
def handle_offset_commit(
    services: BrokerServices, request: Any, conn: Any
) -> dict[str, Any] | Awaitable[dict[str, Any]]:
    body = request.body
    retention = getattr(body, "retention_time", None)
    wanted, refused, names = _wanted(services, body)
    results = services.offset_commits.commit(
        body.group_id, body.member_id, getattr(body, "group_instance_id", None),
        body.generation_id_or_member_epoch, wanted,
        -1 if retention is None else millis(retention))
    return _answer(services, body, refused, names, results)


@api(TXN_OFFSET_COMMIT, range(0, 5))  # Kafka 3.9: v0-v4
@in_connection_order
def handle_txn_offset_commit(
    services: BrokerServices, request: Any, conn: Any
) -> dict[str, Any] | Awaitable[dict[str, Any]]:
    body = request.body
    wanted, refused, names = _wanted(services, body)
    if not wanted:
        return _answer(services, body, refused, names, {})
    status = services.offset_commits.group_status(body.group_id)
    if status is not ErrorCode.none:  # the group first, then the verification (Kafka's order)
        return _commit_response(body, refused, names, dict.fromkeys(wanted, status))
    return _verify_then_txn_commit(services, body, request.api_version, wanted, refused, names)


async def _verify_then_txn_commit(services: BrokerServices, body: Any, version: int,
                                  wanted: dict[TopicPartition, OffsetToCommit],
                                  refused: dict[tuple[int, int], ErrorCode],
                                  names: list[str | None]) -> dict[str, Any]:
    offsets_partition = (OFFSETS_TOPIC,
                         services.group_coordinator.manager.partition_for(body.group_id))
    answers = await services.transaction_verifier.verify(
        body.transactional_id, body.producer_id, body.producer_epoch, [offsets_partition])
    error = for_txn_offset_commit(answers[offsets_partition], version)
    if error is not ErrorCode.none:
        return _commit_response(body, refused, names, dict.fromkeys(wanted, error))
    results = services.offset_commits.txn_commit(
        body.group_id, body.producer_id, body.producer_epoch,
        getattr(body, "member_id", "") or "", getattr(body, "group_instance_id", None),
        getattr(body, "generation_id", -1), wanted)
    answer = _answer(services, body, refused, names, results)
    return answer if isinstance(answer, dict) else await answer


def _answer(services: BrokerServices, body: Any, refused: dict[tuple[int, int], ErrorCode],
            names: list[str | None], results: dict[TopicPartition, ErrorCode]
            ) -> dict[str, Any] | Awaitable[dict[str, Any]]:
    written = any(error is ErrorCode.none for error in results.values())
    if written and services.config.zookeeper_mode:
        return _after_replication(services, body, refused, names, results)
    return _commit_response(body, refused, names, results)


def _wanted(services: BrokerServices, body: Any) -> tuple[
        dict[TopicPartition, OffsetToCommit], dict[tuple[int, int], ErrorCode], list[str | None]]:
    """The offsets to commit, the partitions refused (by topic index), each topic's name."""
    wanted: dict[TopicPartition, OffsetToCommit] = {}
    refused: dict[tuple[int, int], ErrorCode] = {}
    names: list[str | None] = []
    for t_index, topic in enumerate(body.topics):
        name, error = _resolve(services, topic)
        names.append(name)
        for p in topic.partitions:
            if error is ErrorCode.none and name is not None \
                    and _hosted(services, name, p.partition_index):
                wanted[(name, p.partition_index)] = OffsetToCommit(
                    p.committed_offset, getattr(p, "committed_leader_epoch", -1),
                    p.committed_metadata)
            else:
                refused[(t_index, p.partition_index)] = \
                    error if error is not ErrorCode.none else ErrorCode.unknown_topic_or_partition
    return wanted, refused, names


async def _after_replication(services: BrokerServices, body: Any,
                             refused: dict[tuple[int, int], ErrorCode], names: list[str | None],
                             results: dict[TopicPartition, ErrorCode]) -> dict[str, Any]:
    """Acknowledge only once the offsets partition's ISR holds the commit (seed 000)."""
    partition = services.group_coordinator.manager.partition_for(body.group_id)
    error = await services.offsets_topic.wait_replicated(partition)
    if error is not ErrorCode.none:
        results = {tp: error if e is ErrorCode.none else e for tp, e in results.items()}
    return _commit_response(body, refused, names, results)


def _commit_response(body: Any, refused: dict[tuple[int, int], ErrorCode],
                     names: list[str | None],
                     results: dict[TopicPartition, ErrorCode]) -> dict[str, Any]:
    topics = []
    for t_index, topic in enumerate(body.topics):
        name = names[t_index]
        # Not `refused.get(...) or ...`: an ErrorCode is an IntEnum and `none` is falsy. Every
        # partition of a topic that did not resolve (name None) is among the refused.
        partitions = [
            {"partition_index": p.partition_index,
             "error_code": refused[(t_index, p.partition_index)]
             if (t_index, p.partition_index) in refused or name is None
             else results[(name, p.partition_index)]}
            for p in topic.partitions]
        answer = {"name": getattr(topic, "name", None), "partitions": partitions}
        if hasattr(topic, "topic_id"):  # OffsetCommit v10 (TxnOffsetCommit has no topic ids)
            answer["topic_id"] = topic.topic_id
        topics.append(answer)
    return {"throttle_time": 0, "topics": topics}


@api(OFFSET_FETCH, range(1, 10))  # Kafka 3.9: v0-v9; kio has no v0
@in_connection_order
def handle_offset_fetch(services: BrokerServices, request: Any, conn: Any) -> dict[str, Any]:
    body = request.body
    version = request.api_version
    stable = bool(getattr(body, "require_stable", False))
    if version >= MULTI_GROUP_FETCH_VERSION:
        return {"throttle_time": 0,
                "groups": [{"group_id": g.group_id, **_fetch_group(services, g.group_id,
                                                                    g.topics, version, stable)}
                           for g in body.groups]}
    return {"throttle_time": 0, **_fetch_group(services, body.group_id, body.topics, version,
                                               stable)}


def _fetch_group(services: BrokerServices, group_id: str, topics: Any,
                 version: int, require_stable: bool) -> dict[str, Any]:
    by_id = version >= 10
    requested: list[tuple[Any, str | None, ErrorCode, list[int]]] | None = None
    if topics is not None:
        requested = [(t, *_resolve(services, t), list(t.partition_indexes)) for t in topics]
    wanted = None if requested is None else [
        (name, p) for _t, name, error, parts in requested
        if error is ErrorCode.none and name is not None for p in parts]
    error, offsets, unstable = services.offset_commits.fetch(group_id, wanted, require_stable)
    if error is not ErrorCode.none:
        if version >= TOP_LEVEL_FETCH_ERROR_VERSION or requested is None:
            return {"error_code": error, "topics": []}
        # v0-v1 have no top-level error: every requested partition carries it.
        return {"error_code": error, "topics": [
            {"name": name, "partitions": [
                {"partition_index": p, "committed_offset": -1, "metadata": "",
                 "error_code": error} for p in parts]}
            for _t, name, _e, parts in requested]}
    if requested is None:
        listed: dict[str, list[int]] = {}
        for listed_name, p in sorted(offsets):
            listed.setdefault(listed_name, []).append(p)
        requested = [(None, name, ErrorCode.none, parts) for name, parts in listed.items()
                     if not by_id or services.metadata_cache.topic(name) is not None]
    out = []
    for topic, name, topic_error, parts in requested:
        topic_id = getattr(topic, "topic_id", None)
        if topic_id is None and by_id and name is not None:
            info = services.metadata_cache.topic(name)  # listed above only if it exists
            topic_id = None if info is None else info.topic_id
        fetched: dict[str, Any] = {"name": name, "partitions": [
            _fetched(p, None if topic_error is not ErrorCode.none or name is None
                     else offsets.get((name, p)),
                     topic_error if version >= TOP_LEVEL_FETCH_ERROR_VERSION else ErrorCode.none)
            if (name, p) not in unstable else _fetched(p, None, ErrorCode.unstable_offset_commit)
            for p in parts]}
        if by_id:  # only v10's topic entity has the field; v0-v7's is another class
            fetched["topic_id"] = topic_id or ZERO_UUID
        out.append(fetched)
    return {"error_code": ErrorCode.none, "topics": out}


def _fetched(partition: int, committed: CommittedOffset | None,
             error: ErrorCode) -> dict[str, Any]:
    if committed is None or error is not ErrorCode.none:
        return {"partition_index": partition, "committed_offset": -1,
                "committed_leader_epoch": -1, "metadata": "", "error_code": error}
    return {"partition_index": partition, "committed_offset": committed.offset,
            "committed_leader_epoch": committed.leader_epoch, "metadata": committed.metadata,
            "error_code": ErrorCode.none}


@api(OFFSET_DELETE, range(0, 1))
def handle_offset_delete(services: BrokerServices, request: Any, conn: Any) -> dict[str, Any]:
    body = request.body
    wanted = [(t.name, p.partition_index) for t in body.topics for p in t.partitions]
    error, results = services.offset_commits.delete(body.group_id, wanted)
    return {
        "throttle_time": 0,
        "error_code": error,
        "topics": [] if error is not ErrorCode.none else [
            {"name": t.name, "partitions": [
                {"partition_index": p.partition_index,
                 "error_code": results[(t.name, p.partition_index)]}
                for p in t.partitions]}
            for t in body.topics],
    }
