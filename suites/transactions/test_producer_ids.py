"""Transactional producer ids: the coordinator, InitProducerId's epochs and fencing (KIP-98)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from harness.cluster.factory import Faults
from harness.cluster.targets import Target
from harness.wire.errors import ErrorCode

from ._helpers import FENCED, Transactions, TxnProducer, code

pytestmark = pytest.mark.requires_transactions

MARKER_DELAY_MS = 3_000  # long enough to observe the coordinator waiting on its markers


def test_find_coordinator_key_type_1_names_a_live_broker(
        txn: Transactions, kafka_names: Callable[[str], str]) -> None:
    """FindCoordinator with key type 1 names the transactional id's coordinator, a broker of the cluster [KIP-98; protocol guide, FindCoordinator].

    COORDINATOR_NOT_AVAILABLE is retried while ``__transaction_state`` is created on the first
    lookup; the coordinator found answers InitProducerId for the id (a NOT_COORDINATOR there
    would mean FindCoordinator named the wrong broker).
    """  # noqa: E501
    transactional_id = kafka_names("txn")
    found = txn.find_coordinator(transactional_id)
    brokers = {b.node_id: (b.host, b.port) for b in txn.wire.metadata().brokers}
    assert brokers.get(found.node_id) == (found.host, found.port), (found, brokers)
    assert code(txn.init_producer_id(transactional_id)) == ErrorCode.none


def test_init_producer_id_again_keeps_the_id_and_bumps_the_epoch(
        txn: Transactions, kafka_names: Callable[[str], str]) -> None:
    """A second InitProducerId for a transactional id answers the same producer id with the next epoch [KIP-98, "InitPidRequest"].

    That is how a restarted producer fences its previous incarnation; another transactional
    id gets a producer id of its own.
    """  # noqa: E501
    transactional_id = kafka_names("txn")
    first = txn.init_producer_id(transactional_id)
    again = txn.init_producer_id(transactional_id)
    other = txn.init_producer_id(kafka_names("txn-other"))
    assert code(first) == code(again) == code(other) == ErrorCode.none, (first, again, other)
    assert first.producer_id >= 0 and first.producer_epoch >= 0, first
    assert (again.producer_id, again.producer_epoch) == (
        first.producer_id, first.producer_epoch + 1), (first, again)
    assert other.producer_id != first.producer_id, (first, other)


def test_the_previous_epoch_is_fenced_and_its_open_transaction_aborted(
        txn: Transactions, txn_topic: Callable[..., str],
        kafka_names: Callable[[str], str]) -> None:
    """After a new InitProducerId the old epoch is fenced on AddPartitionsToTxn, AddOffsetsToTxn and EndTxn (PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH before KIP-588), on TxnOffsetCommit and Produce (INVALID_PRODUCER_EPOCH), and its open transaction is aborted [KIP-98, "fencing"; KIP-588].

    The old incarnation had begun a transaction with one record: the new InitProducerId
    aborts it, so the record is never read committed and the LSO moves past it. Measured:
    Kafka 3.9 and 4.4 answer PRODUCER_FENCED from the coordinator, INVALID_PRODUCER_EPOCH from
    the leader and from the group coordinator (TxnOffsetCommit, v4 and v5 alike).
    """  # noqa: E501
    topic = txn_topic(1)
    transactional_id = kafka_names("txn")
    old = txn.producer(transactional_id)
    old.begin(topic)
    assert code(old.send(topic, [b"zombie"])) == ErrorCode.none
    new = txn.producer(transactional_id)
    assert new.epoch > old.epoch, (old, new)
    assert set(old.add_partitions(topic).values()) <= FENCED
    group = kafka_names("group")
    assert old.add_offsets(group) in FENCED
    assert new.add_offsets(group) == ErrorCode.none  # the group's partition is in the new one's
    assert set(old.commit_offsets(group, topic, {0: 1}).values()) <= FENCED
    assert code(old.send(topic, [b"late"])) == ErrorCode.invalid_producer_epoch
    assert old.end(True) in FENCED
    end = txn.wire.list_offset(topic, -1).offset
    txn.wait_stable(topic, end)
    assert txn.read_committed(topic, end).committed_values() == []


def test_init_producer_id_right_after_end_txn_is_none_or_concurrent_transactions(
        txn: Transactions, txn_topic: Callable[..., str],
        kafka_names: Callable[[str], str]) -> None:
    """InitProducerId sent at once after EndTxn answers NONE, or CONCURRENT_TRANSACTIONS while the markers are still being written — retriable, then the epoch is bumped [KIP-98; protocol guide, error codes].

    The window between EndTxn's answer (PrepareCommit recorded) and CompleteCommit is the
    markers' write, milliseconds on a healthy cluster: this test, which runs on any target,
    accepts either answer (Kafka 3.9 and 4.4 both answered CONCURRENT_TRANSACTIONS here);
    the next one holds the window open with a slow link and requires it.
    """  # noqa: E501
    topic = txn_topic(1)
    transactional_id = kafka_names("txn")
    producer = txn.producer(transactional_id)
    producer.begin(topic)
    assert code(producer.send(topic, [b"v"])) == ErrorCode.none
    producer.commit()
    at_once = txn.init_producer_id(transactional_id, retry=frozenset())
    assert code(at_once) in {ErrorCode.none, ErrorCode.concurrent_transactions}, at_once
    again = txn.init_producer_id(transactional_id)
    assert code(again) == ErrorCode.none, again
    assert (again.producer_id, again.producer_epoch > producer.epoch) == (
        producer.producer_id, True), (producer, again)


def test_an_epoch_above_the_coordinators_is_fenced_too(
        txn: Transactions, txn_topic: Callable[..., str],
        kafka_names: Callable[[str], str]) -> None:
    """An epoch the coordinator never gave — above the current one — is refused like a stale one: PRODUCER_FENCED on AddPartitionsToTxn and EndTxn, INVALID_PRODUCER_EPOCH on Produce [KIP-98; TransactionCoordinator's epoch checks].

    Only InitProducerId moves the epoch (and, at transaction version 2, EndTxn): a client
    cannot jump ahead of it. Measured on Kafka 3.9 and 4.4 alike.
    """  # noqa: E501
    topic = txn_topic(1)
    producer = txn.producer(kafka_names("txn"))
    ahead = producer.epoch + 5
    assert set(producer.add_partitions(topic, epoch=ahead).values()) <= FENCED
    assert producer.end(True, epoch=ahead) in FENCED
    assert code(producer.send(topic, [b"ahead"], epoch=ahead)) == \
        ErrorCode.invalid_producer_epoch
    producer.begin(topic)  # the real epoch still works
    assert code(producer.send(topic, [b"v"])) == ErrorCode.none
    producer.commit()


@pytest.mark.requires_faults
@pytest.mark.requires_multi_broker
def test_a_transaction_whose_markers_are_delayed_is_concurrent_transactions(
        txn: Transactions, txn_topic: Callable[..., str], kafka_target: Target,
        kafka_faults: Faults, kafka_names: Callable[[str], str]) -> None:
    """While a committed transaction's markers cannot reach the partition's leader, the coordinator holds it in PrepareCommit and answers InitProducerId and AddPartitionsToTxn for the id CONCURRENT_TRANSACTIONS; once they arrive it completes and InitProducerId bumps the epoch [KIP-98; TransactionCoordinator].

    The transactional id is chosen so that its coordinator is not the leader, and a latency
    toxic on the coordinator's link to the leader (its requests only: the leader's own fetches
    from the coordinator, which replicate ``__transaction_state``, are not slowed) delays the
    WriteTxnMarkers request by seconds — a window the test can observe deterministically.
    """  # noqa: E501
    topic = txn_topic(1)
    leader = txn.wire.metadata(topic).topics[0].partitions[0].leader_id
    transactional_id = txn.id_coordinated_elsewhere(lambda: kafka_names("txn"), leader)
    producer = txn.producer(transactional_id)
    producer.begin(topic)
    assert code(producer.send(topic, [b"v"])) == ErrorCode.none

    spec = kafka_target.require_nodes().spec
    coordinator = txn.find_coordinator(transactional_id).node_id
    link = f"{spec.node_name(coordinator)}->{spec.node_name(leader)}"
    toxic = kafka_faults.add_toxic(link, "latency", {"latency": MARKER_DELAY_MS},
                                   stream="upstream")
    producer.commit()
    held = txn.init_producer_id(transactional_id, retry=frozenset())
    assert code(held) == ErrorCode.concurrent_transactions, held
    assert producer.add_partitions(topic) == {0: ErrorCode.concurrent_transactions}
    assert txn.describe(transactional_id).transaction_state == "PrepareCommit"
    kafka_faults.remove_toxic(link, toxic)

    txn.wait_state(transactional_id, "CompleteCommit")
    again = txn.init_producer_id(transactional_id, retry=frozenset())
    assert code(again) == ErrorCode.none, again
    assert again.producer_epoch > producer.epoch, (producer, again)


def test_an_unknown_transactional_id_or_producer_id_is_invalid_producer_id_mapping(
        txn: Transactions, txn_topic: Callable[..., str],
        kafka_names: Callable[[str], str]) -> None:
    """AddPartitionsToTxn, AddOffsetsToTxn and EndTxn for a transactional id never initialised, or with a producer id that is not the id's, answer INVALID_PRODUCER_ID_MAPPING [KIP-98; TransactionCoordinator].

    The known id is idle (no transaction) when asked with the wrong producer id: Kafka 4.4
    answered CONCURRENT_TRANSACTIONS to a wrong producer id while the id's transaction was
    completing, checking the state first.
    """  # noqa: E501
    topic = txn_topic(1)
    known = txn.producer(kafka_names("txn"))
    unknown = TxnProducer(txn, kafka_names("txn-never"), known.producer_id, 0)
    wrong_pid = TxnProducer(txn, known.transactional_id, known.producer_id + 1, known.epoch)
    for producer in (unknown, wrong_pid):
        assert producer.add_partitions(topic) == {0: ErrorCode.invalid_producer_id_mapping}
        assert producer.add_offsets(kafka_names("group")) == \
            ErrorCode.invalid_producer_id_mapping
        assert producer.end(True) == ErrorCode.invalid_producer_id_mapping
