"""The transaction coordinator's APIs at Kafka 3.9's versions: AddPartitionsToTxn v0-v5 (v4+
the brokers' batched form, with verify_only), AddOffsetsToTxn v0-v4, EndTxn v0-v4,
DescribeTransactions v0 and ListTransactions v0-v1. InitProducerId with a transactional id is
in `init_producer_id.py`.

The coordinator (`coordinator/transaction`) decides; these handlers only translate. The one
translation with a rule of its own is fencing: KIP-588 introduced PRODUCER_FENCED, and a
client speaking a version from before it is told INVALID_PRODUCER_EPOCH instead.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from typing import Any

from harness.wire.errors import ErrorCode
from reference_broker.coordinator.transaction.transaction_metadata import (
    TopicPartition,
    TransactionMetadata,
    TransactionState,
)
from reference_broker.server.api_registry import api
from reference_broker.server.broker_services import BrokerServices

ADD_PARTITIONS_TO_TXN = 24
ADD_OFFSETS_TO_TXN = 25
END_TXN = 26
DESCRIBE_TRANSACTIONS = 65
LIST_TRANSACTIONS = 66

# The first version of each API whose clients know PRODUCER_FENCED (KIP-588).
PRODUCER_FENCED_SINCE = {ADD_PARTITIONS_TO_TXN: 2, ADD_OFFSETS_TO_TXN: 2, END_TXN: 2,
                         22: 4}  # 22: InitProducerId
BATCHED_ADD_PARTITIONS = 4   # the brokers' request (KIP-890 part 1)
TRANSACTION_ABORTABLE_SINCE = 5  # KIP-1050: a partition not in the transaction


def fenced_for(api_key: int, version: int, error: ErrorCode) -> ErrorCode:
    """PRODUCER_FENCED as the client's version knows it."""
    if error is ErrorCode.producer_fenced and version < PRODUCER_FENCED_SINCE[api_key]:
        return ErrorCode.invalid_producer_epoch
    return error


def _partitions(topics: Iterable[Any]) -> list[TopicPartition]:
    return [(t.name, p) for t in topics for p in t.partitions]


def _by_topic(results: dict[TopicPartition, ErrorCode]) -> list[dict[str, Any]]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), error in results.items():
        topics.setdefault(topic, []).append(
            {"partition_index": partition, "partition_error_code": error})
    return [{"name": name, "results_by_partition": parts} for name, parts in topics.items()]


@api(ADD_PARTITIONS_TO_TXN, range(0, 6))  # Kafka 3.9: v0-v5
async def handle_add_partitions_to_txn(services: BrokerServices, request: Any,
                                       conn: Any) -> dict[str, Any]:
    body = request.body
    version = request.api_version
    coordinator = services.transaction_coordinator
    if version < BATCHED_ADD_PARTITIONS:
        partitions = _partitions(body.v3_and_below_topics)
        error = await coordinator.add_partitions(
            body.v3_and_below_transactional_id, body.v3_and_below_producer_id,
            body.v3_and_below_producer_epoch, partitions)
        error = fenced_for(ADD_PARTITIONS_TO_TXN, version, error)
        return {"throttle_time": 0,
                "results_by_topic_v3_and_below": _by_topic(dict.fromkeys(partitions, error))}
    not_added = ErrorCode.transaction_abortable if version >= TRANSACTION_ABORTABLE_SINCE \
        else ErrorCode.invalid_txn_state
    results = []
    for txn in body.transactions:
        partitions = _partitions(txn.topics)
        if txn.verify_only:
            error, verified = coordinator.verify_partitions(
                txn.transactional_id, txn.producer_id, txn.producer_epoch, partitions,
                not_added)
            answers = verified or dict.fromkeys(partitions, error)
        else:
            error = await coordinator.add_partitions(
                txn.transactional_id, txn.producer_id, txn.producer_epoch, partitions)
            answers = dict.fromkeys(partitions, error)
        results.append({"transactional_id": txn.transactional_id,
                        "topic_results": _by_topic(answers)})
    return {"throttle_time": 0, "error_code": ErrorCode.none,
            "results_by_transaction": results}


@api(ADD_OFFSETS_TO_TXN, range(0, 5))  # Kafka 3.9: v0-v4
async def handle_add_offsets_to_txn(services: BrokerServices, request: Any,
                                    conn: Any) -> dict[str, Any]:
    body = request.body
    error = await services.transaction_coordinator.add_offsets(
        body.transactional_id, body.producer_id, body.producer_epoch, body.group_id)
    return {"throttle_time": 0,
            "error_code": fenced_for(ADD_OFFSETS_TO_TXN, request.api_version, error)}


@api(END_TXN, range(0, 5))  # Kafka 3.9: v0-v4 (v5, KIP-890's epoch bump, is Kafka 4)
async def handle_end_txn(services: BrokerServices, request: Any, conn: Any) -> dict[str, Any]:
    body = request.body
    error = await services.transaction_coordinator.end_transaction(
        body.transactional_id, body.producer_id, body.producer_epoch, body.committed)
    return {"throttle_time": 0, "error_code": fenced_for(END_TXN, request.api_version, error)}


def _timestamp(ms: int) -> datetime.datetime:
    """Milliseconds as kio's timestamp, -1 (no transaction) included: Kafka answers -1 there,
    which harness.wire would otherwise turn into a null the field cannot hold."""
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


def _described(transactional_id: str, error: ErrorCode,
               meta: TransactionMetadata | None) -> dict[str, Any]:
    if meta is None:  # Kafka 3.9's zero values, measured (tests/differential)
        return {"error_code": error, "transactional_id": transactional_id,
                "transaction_state": "", "transaction_timeout": 0,
                "transaction_start_time": _timestamp(0), "producer_id": -1, "producer_epoch": 0,
                "topics": []}
    topics: dict[str, list[int]] = {}
    for topic, partition in sorted(meta.partitions):
        topics.setdefault(topic, []).append(partition)
    return {"error_code": ErrorCode.none, "transactional_id": transactional_id,
            "transaction_state": meta.state.display_name,
            "transaction_timeout": meta.timeout_ms,
            "transaction_start_time": _timestamp(meta.txn_start_ms),
            "producer_id": meta.producer_id, "producer_epoch": meta.producer_epoch,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()]}


@api(DESCRIBE_TRANSACTIONS, range(0, 1))
def handle_describe_transactions(services: BrokerServices, request: Any,
                                 conn: Any) -> dict[str, Any]:
    coordinator = services.transaction_coordinator
    return {"throttle_time": 0, "transaction_states": [
        _described(tid, *coordinator.describe(tid)) for tid in request.body.transactional_ids]}


@api(LIST_TRANSACTIONS, range(0, 2))  # Kafka 3.9: v0-v1 (v1: KIP-994's duration filter)
def handle_list_transactions(services: BrokerServices, request: Any,
                             conn: Any) -> dict[str, Any]:
    body = request.body
    names = list(body.state_filters)
    states = {name: TransactionState.from_display_name(name) for name in names}
    unknown = [name for name, state in states.items() if state is None]
    wanted = frozenset(s for s in states.values() if s is not None) if names else None
    producer_ids = frozenset(body.producer_id_filters) or None
    duration = getattr(body, "duration_filter", -1)
    listed: list[TransactionMetadata] = []
    error = ErrorCode.none
    if wanted is None or wanted:
        error, listed = services.transaction_coordinator.list_transactions(
            wanted, producer_ids, duration)
    return {"throttle_time": 0, "error_code": error, "unknown_state_filters": unknown,
            "transaction_states": [
                {"transactional_id": m.transactional_id, "producer_id": m.producer_id,
                 "transaction_state": m.state.display_name} for m in listed]}


