"""KIP-890 part 1 (Kafka 3.9's `transaction.partition.verification.enable=true`): before a
partition leader appends a producer's first transactional batch there, and before the group
coordinator writes a TxnOffsetCommit, it asks the producer's transaction coordinator whether
the partition is part of that producer id and epoch's ongoing transaction.

Without the question a hanging transaction is possible: a late batch of a transaction that was
already aborted (or never added the partition) would open a transaction the coordinator knows
nothing about, and the partition's last stable offset would stay behind it for good. The
question is AddPartitionsToTxn v5 with `verify_only`, sent to the coordinator of the batch's
transactional id (the leader of its `__transaction_state` partition) — asked directly when that
is this broker, through a broker-to-broker client otherwise.

The coordinator's answer is translated per requesting API as Kafka 3.9 does
(`for_produce`, `for_txn_offset_commit`, pure): a fenced epoch becomes INVALID_PRODUCER_EPOCH,
the answer for a partition not added (TRANSACTION_ABORTABLE, KIP-1050) becomes
INVALID_TXN_STATE for clients from before it, and retriable coordinator errors become an error
the requesting client already retries.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from harness.wire.errors import ErrorCode
from reference_broker.coordinator.transaction.transaction_coordinator import (
    TransactionCoordinator,
)
from reference_broker.coordinator.transaction.transaction_metadata import TopicPartition
from reference_broker.network.broker_client import BrokerClient, BrokerClientError

log = logging.getLogger("reference_broker.server.transaction_verification")

ADD_PARTITIONS_TO_TXN = 24
VERIFY_VERSION = 5  # the brokers' batched form, answering TRANSACTION_ABORTABLE (KIP-1050)
PRODUCE_ABORTABLE_SINCE = 11  # Kafka 3.9 tells Produce v11 clients TRANSACTION_ABORTABLE
TXN_OFFSET_COMMIT_ABORTABLE_SINCE = 4  # and TxnOffsetCommit v4 clients

# Coordinator answers that only mean "ask again later".
_RETRIABLE = frozenset({ErrorCode.concurrent_transactions, ErrorCode.network_exception,
                        ErrorCode.coordinator_load_in_progress,
                        ErrorCode.coordinator_not_available, ErrorCode.not_coordinator})

CoordinatorOf = Callable[[str], int | None]
ClientFor = Callable[[int], BrokerClient | None]


def _translated(error: ErrorCode, version: int, abortable_since: int,
                retriable_as: ErrorCode) -> ErrorCode:
    if error is ErrorCode.producer_fenced:
        return ErrorCode.invalid_producer_epoch
    if error in _RETRIABLE:
        return retriable_as
    if error is ErrorCode.transaction_abortable and version < abortable_since:
        return ErrorCode.invalid_txn_state
    return error


def for_produce(error: ErrorCode, version: int) -> ErrorCode:
    """The verification's answer as a Produce partition error. Retriable coordinator errors
    become NOT_ENOUGH_REPLICAS: every producer retries it, and it refreshes no metadata."""
    return _translated(error, version, PRODUCE_ABORTABLE_SINCE, ErrorCode.not_enough_replicas)


def for_txn_offset_commit(error: ErrorCode, version: int) -> ErrorCode:
    """The verification's answer as a TxnOffsetCommit partition error; retriable coordinator
    errors become COORDINATOR_NOT_AVAILABLE, which the producer retries."""
    return _translated(error, version, TXN_OFFSET_COMMIT_ABORTABLE_SINCE,
                       ErrorCode.coordinator_not_available)


class TransactionVerifier:
    """Asks a transactional id's coordinator, wherever it is, about partitions."""

    def __init__(self, broker_id: int, coordinator: TransactionCoordinator,
                 coordinator_of: CoordinatorOf, client_for: ClientFor) -> None:
        self._broker_id = broker_id
        self._coordinator = coordinator
        self._coordinator_of = coordinator_of
        self._client_for = client_for

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """The coordinator's answer per partition, untranslated: NONE when the partition is in
        the producer's ongoing transaction."""
        wanted = sorted(set(partitions))
        node = self._coordinator_of(transactional_id)
        if node is None:
            return dict.fromkeys(wanted, ErrorCode.coordinator_not_available)
        if node == self._broker_id:
            error, local = self._coordinator.verify_partitions(
                transactional_id, producer_id, producer_epoch, wanted,
                ErrorCode.transaction_abortable)
            return local or dict.fromkeys(wanted, error)
        client = self._client_for(node)
        if client is None:
            return dict.fromkeys(wanted, ErrorCode.coordinator_not_available)
        topics: dict[str, list[int]] = {}
        for topic, partition in wanted:
            topics.setdefault(topic, []).append(partition)
        body = {"transactions": [{
            "transactional_id": transactional_id, "producer_id": producer_id,
            "producer_epoch": producer_epoch, "verify_only": True,
            "topics": [{"name": name, "partitions": ids} for name, ids in topics.items()]}]}
        try:
            response = await client.request(ADD_PARTITIONS_TO_TXN, VERIFY_VERSION, body)
        except BrokerClientError as exc:
            log.info("Verification with broker %d failed: %s", node, exc)
            return dict.fromkeys(wanted, ErrorCode.network_exception)
        top = ErrorCode(int(response.error_code))
        if top is not ErrorCode.none:
            return dict.fromkeys(wanted, top)
        answers: dict[TopicPartition, ErrorCode] = {}
        for txn in response.results_by_transaction:
            for topic_result in txn.topic_results:
                for p in topic_result.results_by_partition:
                    answers[(topic_result.name, p.partition_index)] = \
                        ErrorCode(int(p.partition_error_code))
        return {tp: answers.get(tp, ErrorCode.unknown_server_error) for tp in wanted}
