"""Produce: acks 0/1/-1, per-partition validation and append, Kafka's error answers.

Transactional batches are appended and tracked by the partition's producer state (which opens
the producer's transaction); as in Kafka, a request carrying one must name its transactional id,
else every partition answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED. As Kafka 3.9 with
`transaction.partition.verification.enable` (KIP-890 part 1), a producer's first transactional
batch in a partition — no transaction of its id and epoch open there — is appended only once
the transaction coordinator confirms that the partition is in the producer's ongoing
transaction; otherwise the partition answers the coordinator's refusal. Once the transaction is
open in the partition its later batches need no question: the log's epoch check covers them.

A connection's Produce requests append in the order they arrived (the services'
``produce_append_order``). Kafka reads no further request of a connection until it has answered
the one in hand; this broker overlaps them, which keeps the order of appends only while every
Produce appends at once. One that waits for the coordinator holds back the appends of the
connection's later Produce requests until its own are done — else a producer's next batch for a
partition whose transaction is open (no question needed) would be appended ahead of its earlier
batch for that partition, riding in a request that waits for another partition's answer, and be
refused OUT_OF_ORDER_SEQUENCE_NUMBER. The wait for the ISR (acks=all) is not held in that order:
it follows the append, as before.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

from harness.wire.errors import ErrorCode, error_name
from harness.wire.protocol import ProtocolError
from harness.wire.records import HEADER_SIZE, read_header
from reference_broker.log.producer_state import NO_OFFSET
from reference_broker.server import topic_config
from reference_broker.server.api_registry import api
from reference_broker.server.broker_services import BrokerServices
from reference_broker.server.transaction_verification import for_produce

TopicPartition = tuple[str, int]

PRODUCE = 0
ZERO_UUID = uuid.UUID(int=0)


@api(PRODUCE, range(3, 12))  # Kafka 3.9: v0-v11; kio has no v0-v2
def handle_produce(
    services: BrokerServices, request: Any, conn: Any
) -> dict[str, Any] | None | Awaitable[dict[str, Any] | None]:
    body = request.body
    acks = body.acks
    if getattr(body, "transactional_id", None) is None and _has_transactional_records(body):
        if acks == 0:  # no response to carry the error: Kafka closes the connection
            raise ProtocolError("transactional records without a transactional id")
        return _refuse_all(body, ErrorCode.transactional_id_authorization_failed)
    order = services.produce_append_order
    if order.idle(conn.id) and not _unverified(services, body):
        return _produce(services, body, {})
    return _answer(order.run(conn.id, lambda: _verify_then_append(
        services, body, request.api_version)))


@dataclass(frozen=True, slots=True)
class _Appended:
    """A Produce whose appends are done: its response, or an awaitable of it (acks=all waiting
    for the ISR). Wrapped so that the connection's append order ends at the appends, not at the
    ISR's answer (the order awaits what its action returns, and this is not awaitable)."""

    response: dict[str, Any] | None | Awaitable[dict[str, Any]]


async def _answer(appended: Awaitable[_Appended]) -> dict[str, Any] | None:
    response = (await appended).response
    if response is None or isinstance(response, dict):
        return response
    return await response


def _unverified(services: BrokerServices,
                body: Any) -> dict[tuple[int, int], list[TopicPartition]]:
    """The partitions led here whose transactional batch would open a transaction, by the
    batch's producer id and epoch: those the coordinator must confirm first."""
    unverified: dict[tuple[int, int], list[TopicPartition]] = {}
    cache = services.metadata_cache
    for topic_data in body.topic_data:
        name = getattr(topic_data, "name", None)
        topic = cache.topic(name) if name is not None else cache.topic_by_id(
            getattr(topic_data, "topic_id", None))
        if topic is None:
            continue
        for data in topic_data.partition_data:
            if data.records is None or len(data.records) < HEADER_SIZE:
                continue
            header = read_header(data.records)
            part = services.replica_manager.partition(topic.name, data.index)
            if not header.is_transactional or part is None or not part.is_leader:
                continue
            entry = part.log.producer_state.get(header.producer_id)
            if entry is not None and entry.producer_epoch == header.producer_epoch \
                    and entry.current_txn_first_offset != NO_OFFSET:
                continue
            unverified.setdefault((header.producer_id, header.producer_epoch), []).append(
                (topic.name, data.index))
    return unverified


async def _verify_then_append(services: BrokerServices, body: Any, version: int) -> _Appended:
    """In the connection's append order: ask the coordinator about the partitions that still
    need it once the earlier Produce requests have appended (one of them may have opened the
    transaction there), then append what it confirmed and refuse the rest."""
    refused: dict[TopicPartition, ErrorCode] = {}
    for (producer_id, epoch), partitions in _unverified(services, body).items():
        answers = await services.transaction_verifier.verify(
            body.transactional_id, producer_id, epoch, partitions)
        refused.update({tp: for_produce(error, version) for tp, error in answers.items()
                        if error is not ErrorCode.none})
    return _Appended(_produce(services, body, refused))


def _produce(services: BrokerServices, body: Any, refused: dict[TopicPartition, ErrorCode]
             ) -> dict[str, Any] | None | Awaitable[dict[str, Any]]:
    """Append every partition's records but those `refused` (which answer their error)."""
    acks = body.acks
    cache = services.metadata_cache
    replicas = services.replica_manager
    responses = []
    failed = []
    waiting: list[tuple[dict[str, Any], str, int, int, int]] = []
    for topic_data in body.topic_data:
        name = getattr(topic_data, "name", None)
        topic_id = getattr(topic_data, "topic_id", None)
        topic = cache.topic(name) if name is not None else cache.topic_by_id(topic_id)
        partitions = []
        for data in topic_data.partition_data:
            if acks not in (0, 1, -1):
                result = {"index": data.index, "error_code": ErrorCode.invalid_required_acks}
            elif topic is None:
                error = ErrorCode.unknown_topic_or_partition if name is not None \
                    else ErrorCode.unknown_topic_id
                result = {"index": data.index, "error_code": error}
            elif (topic.name, data.index) in refused:
                result = {"index": data.index, "error_code": refused[(topic.name, data.index)]}
            else:
                min_isr = topic_config.effective(services.config, topic.configs,
                                                 "min.insync.replicas")
                outcome = replicas.append_records(topic.name, data.index, data.records,
                                                  required_acks=acks,
                                                  min_insync_replicas=min_isr)
                result = {
                    "index": data.index,
                    "error_code": outcome.error,
                    "base_offset": outcome.base_offset,
                    "log_append_time": outcome.log_append_time,
                    "log_start_offset": outcome.log_start_offset,
                    "error_message": outcome.message,
                    "record_errors": [{"batch_index": 0,
                                       "batch_index_error_message": outcome.message}]
                    if outcome.error is ErrorCode.invalid_record else [],
                }
                if acks == -1 and outcome.error is ErrorCode.none:
                    waiting.append((result, topic.name, data.index, outcome.required_offset,
                                    min_isr))
            if result["error_code"] is not ErrorCode.none:
                failed.append(f"{name or topic_id}-{data.index}: "
                              f"{error_name(result['error_code'])}")
            result.setdefault("base_offset", -1)
            result.setdefault("log_append_time", -1)
            result.setdefault("log_start_offset", -1)
            partitions.append(result)
        responses.append({"name": name, "topic_id": topic_id or ZERO_UUID,
                          "partition_responses": partitions})
    if acks == 0:
        if failed:
            # Kafka closes the connection on a failed acks=0 produce: it is the only way the
            # client can learn that something went wrong.
            raise ProtocolError("acks=0 produce failed: " + ", ".join(failed))
        return None
    response = {"responses": responses, "throttle_time": 0}
    if waiting and not all(_replicated(services, w) for w in waiting):
        return _await_isr(services, response, waiting, body.timeout)
    return response


def _has_transactional_records(body: Any) -> bool:
    """Whether a partition's first batch is transactional (Kafka looks at the first batch)."""
    return any(
        data.records is not None and len(data.records) >= HEADER_SIZE
        and read_header(data.records).is_transactional
        for topic_data in body.topic_data for data in topic_data.partition_data)


def _refuse_all(body: Any, error: ErrorCode) -> dict[str, Any]:
    return {"throttle_time": 0, "responses": [
        {"name": getattr(t, "name", None), "topic_id": getattr(t, "topic_id", None) or ZERO_UUID,
         "partition_responses": [
             {"index": d.index, "error_code": error, "base_offset": -1, "log_append_time": -1,
              "log_start_offset": -1, "error_message": None, "record_errors": []}
             for d in t.partition_data]}
        for t in body.topic_data]}


def _replicated(services: BrokerServices, waiting: tuple) -> bool:
    _result, topic, partition, required, min_isr = waiting
    part = services.replica_manager.partition(topic, partition)
    return part is not None and part.acks_all_outcome(required, min_isr) is ErrorCode.none


async def _await_isr(services: BrokerServices, response: dict[str, Any],
                     waiting: list[tuple[dict[str, Any], str, int, int, int]],
                     timeout: Any) -> dict[str, Any]:
    """acks=all: answer once every partition's ISR has the batch (or time is up)."""
    timeout_s = timeout.total_seconds() if hasattr(timeout, "total_seconds") else timeout / 1000
    outcomes = await asyncio.gather(*(
        services.replica_manager.wait_for_acks(topic, partition, required, timeout_s, min_isr)
        for _result, topic, partition, required, min_isr in waiting))
    for (result, *_), error in zip(waiting, outcomes, strict=True):
        result["error_code"] = error
    return response
