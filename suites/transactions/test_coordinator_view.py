"""What the transaction coordinator holds: DescribeTransactions, ListTransactions (KIP-664), and
the abort of a transaction past its timeout (KIP-98); and what a partition leader holds of the
same producers: DescribeProducers (KIP-664)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from harness.wire.errors import ErrorCode

from ._helpers import (
    DESCRIBE_PRODUCERS,
    FENCED,
    LATEST,
    LIST_TRANSACTIONS,
    ControlType,
    Transactions,
    code,
    pattern_of,
)

pytestmark = pytest.mark.requires_transactions

PATTERN_LIST_TRANSACTIONS = 2  # ListTransactions v2 filters by transactional id (KIP-1152)
SHORT_TIMEOUT_MS = 1_000
ABORT_WAIT_S = 60.0  # the timeout, then the coordinator's check (every 10 s by Kafka's default)


def test_describe_transactions_shows_the_ongoing_partitions_then_the_outcome(
        txn: Transactions, txn_topic: Callable[..., str],
        kafka_names: Callable[[str], str]) -> None:
    """DescribeTransactions answers the coordinator's state of a transactional id: Empty after InitProducerId, Ongoing with the partitions added, then CompleteCommit or CompleteAbort with none [KIP-664; TransactionState].

    The producer id, epoch and timeout are those InitProducerId gave; an id the coordinator
    does not hold is TRANSACTIONAL_ID_NOT_FOUND.
    """  # noqa: E501
    topic = txn_topic(2)
    producer = txn.producer(kafka_names("txn"), timeout_ms=45_000)
    empty = txn.describe(producer.transactional_id)
    assert (code(empty), empty.transaction_state, empty.topics) == (ErrorCode.none, "Empty", ())
    assert (empty.producer_id, empty.producer_epoch) == (producer.producer_id, producer.epoch)
    assert empty.transaction_timeout.total_seconds() == 45

    producer.begin(topic, 0, 1)
    ongoing = txn.describe(producer.transactional_id)
    assert ongoing.transaction_state == "Ongoing", ongoing
    assert [(t.topic, sorted(t.partitions)) for t in ongoing.topics] == [(topic, [0, 1])]
    producer.commit()
    done = txn.wait_state(producer.transactional_id, "CompleteCommit")
    assert done.topics == () and done.producer_id == producer.producer_id, done

    producer.begin(topic, 1)
    producer.abort()
    txn.wait_state(producer.transactional_id, "CompleteAbort")
    unknown = txn.describe(kafka_names("txn-never"))
    assert code(unknown) == ErrorCode.transactional_id_not_found, unknown


def test_list_transactions_filters_by_state_and_producer_id(
        txn: Transactions, txn_topic: Callable[..., str],
        kafka_names: Callable[[str], str]) -> None:
    """ListTransactions at a coordinator lists the transactions it holds, filtered by state and producer id; an unknown state filter is echoed in ``unknown_state_filters``; v2 also filters by a transactional id pattern [KIP-664; KIP-1152].

    The filters are combined (a transaction must match both). Measured: Kafka 3.9 speaks v1,
    where no pattern exists; 4.4 speaks v2.
    """  # noqa: E501
    topic = txn_topic(1)
    producer = txn.producer(kafka_names("txn"))
    producer.begin(topic)
    coordinator = producer.coordinator

    def listed(*states: str) -> list[tuple[str, int, str]]:
        answer = txn.list_transactions(coordinator, states=states,
                                       producer_ids=[producer.producer_id])
        assert code(answer) == ErrorCode.none and not answer.unknown_state_filters, answer
        return [(t.transactional_id, t.producer_id, t.transaction_state)
                for t in answer.transaction_states]

    mine = (producer.transactional_id, producer.producer_id)
    assert listed("Ongoing") == [(*mine, "Ongoing")]
    assert listed("CompleteCommit") == []
    producer.commit()
    txn.wait_state(producer.transactional_id, "CompleteCommit")
    assert listed("Ongoing") == []
    assert listed("CompleteCommit", "CompleteAbort") == [(*mine, "CompleteCommit")]
    assert listed() == [(*mine, "CompleteCommit")]

    bogus = txn.list_transactions(coordinator, states=["NoSuchState"])
    assert (code(bogus), list(bogus.unknown_state_filters), bogus.transaction_states) == (
        ErrorCode.none, ["NoSuchState"], ()), bogus
    if txn.wire.version(LIST_TRANSACTIONS) >= PATTERN_LIST_TRANSACTIONS:
        by_name = txn.list_transactions(coordinator,
                                        pattern=pattern_of(producer.transactional_id))
        assert [t.transactional_id for t in by_name.transaction_states] == [mine[0]]


def test_an_abandoned_transaction_is_aborted_at_its_timeout(
        txn: Transactions, txn_topic: Callable[..., str],
        kafka_names: Callable[[str], str]) -> None:
    """A transaction left open past the ``transaction_timeout_ms`` its producer gave InitProducerId is aborted by the coordinator: the epoch is bumped (fencing the producer), an ABORT marker is written and the LSO moves past it [KIP-98, "transaction timeout"; TransactionCoordinator.abortTimedOutTransactions].

    The producer begins a transaction with one record and sends nothing more. Its old epoch
    can then commit nothing: Kafka 3.9 answers EndTxn PRODUCER_FENCED, Kafka 4.4 (EndTxn v5)
    INVALID_TXN_STATE — a commit at the epoch just below the bumped one is taken as a retry
    of the transaction that ended as an abort (KIP-890).
    """  # noqa: E501
    topic = txn_topic(1)
    producer = txn.producer(kafka_names("txn"), timeout_ms=SHORT_TIMEOUT_MS)
    producer.begin(topic)
    assert code(producer.send(topic, [b"abandoned"])) == ErrorCode.none
    assert txn.stable_offset(topic) == 0

    assert txn.wait_stable(topic, 2, timeout=ABORT_WAIT_S) == 2
    assert txn.wire.list_offset(topic, LATEST).offset == 2
    read = txn.read_committed(topic, 2)
    assert (read.committed_values(), read.markers) == ([], {1: ControlType.ABORT}), read
    aborted = txn.wait_state(producer.transactional_id, "CompleteAbort")
    assert aborted.producer_epoch > producer.epoch, (producer, aborted)
    assert producer.end(True) in FENCED | {ErrorCode.invalid_txn_state}
    assert txn.read_committed(topic, 2).committed_values() == []


def test_describe_producers_shows_the_leaders_open_transaction_until_its_marker(
        txn: Transactions, txn_topic: Callable[..., str],
        kafka_names: Callable[[str], str]) -> None:
    """DescribeProducers at a partition's leader lists each producer it remembers: its epoch, last sequence and last batch's timestamp, and the first offset of its open transaction — until the transaction's marker, then -1 — with the coordinator epoch and the timestamp of that marker [KIP-664; ProducerStateManager.appendEndTxnMarker].

    A partition the topic does not have is UNKNOWN_TOPIC_OR_PARTITION (Kafka's
    getPartitionOrError). The data batch is written with timestamp 0 (CreateTime), its max
    timestamp and so the producer's last; the marker is stamped by the leader when written,
    and Kafka 3.9 then answers the marker's time.
    """  # noqa: E501
    txn.wire.version(DESCRIBE_PRODUCERS)  # skips a target that does not advertise it
    topic = txn_topic(1)
    producer = txn.producer(kafka_names("txn"))
    producer.begin(topic)
    assert code(producer.send(topic, [b"a", b"b"])) == ErrorCode.none

    def mine() -> tuple[int, int, int, int]:
        answer = txn.describe_producers(topic, 0)[0]
        assert code(answer) == ErrorCode.none, answer
        (state,) = [s for s in answer.active_producers if s.producer_id == producer.producer_id]
        return (state.producer_epoch, state.last_sequence, state.last_timestamp,
                state.current_txn_start_offset)

    assert mine() == (producer.epoch, 1, 0, 0)
    before_commit_ms, epoch_before = time.time() * 1000, producer.epoch
    producer.commit()
    txn.wait_stable(topic, 3)
    epoch, last_sequence, marker_ms, txn_start = mine()
    # At transaction version 2 (EndTxn v5, Kafka 4.x) the commit bumps the epoch and the
    # marker is written at the new one, whose entry starts without sequences (4.4 measured).
    bumped = producer.epoch > epoch_before
    assert (epoch, last_sequence, txn_start) == (producer.epoch, -1 if bumped else 1, -1)
    # The leader's clock and this one are the same machine's, give or take a second.
    assert before_commit_ms - 1_000 <= marker_ms <= time.time() * 1000 + 1_000, marker_ms
    (after,) = [s for s in txn.describe_producers(topic, 0)[0].active_producers
                if s.producer_id == producer.producer_id]
    assert after.coordinator_epoch >= 0, after
    unknown = txn.describe_producers(topic, 7)[7]
    assert (code(unknown), unknown.active_producers) == (
        ErrorCode.unknown_topic_or_partition, ()), unknown
