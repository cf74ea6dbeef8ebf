"""What the coordinator and the leaders answer a transaction's requests out of order (KIP-98,
KIP-890)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from harness.wire.errors import ErrorCode

from ._helpers import (
    ADD_PARTITIONS_TO_TXN,
    END_TXN,
    PRODUCE,
    Transactions,
    code,
    implicit_add_version,
)

pytestmark = pytest.mark.requires_transactions

EPOCH_BUMPING_END_TXN = 5    # EndTxn v5 answers the epoch it bumped (KIP-890, part 2)
VERIFYING_ADD_PARTITIONS = 4  # AddPartitionsToTxn v4: the brokers' batched request (KIP-890)
LAST_VERIFIED_PRODUCE = 11    # a Produce up to v11 must name partitions added before (KIP-890)


def test_end_txn_with_nothing_added(txn: Transactions,
                                    kafka_names: Callable[[str], str]) -> None:
    """EndTxn of a producer that added nothing: a commit is INVALID_TXN_STATE; an abort is INVALID_TXN_STATE too up to EndTxn v4, and from v5 (KIP-890's transaction version 2) it is accepted and answers a bumped epoch [KIP-98; KIP-890; TransactionCoordinator.endTransaction].

    Measured: Kafka 3.9 (EndTxn up to v4) refuses both; Kafka 4.4 (v5) refuses the commit and
    answers the abort with NONE and the epoch + 1, which is how a KIP-890 client aborts after
    an error without knowing whether anything was added.
    """  # noqa: E501
    producer = txn.producer(kafka_names("txn"))
    epoch = producer.epoch
    assert producer.end(True) == ErrorCode.invalid_txn_state
    assert producer.epoch == epoch
    if txn.wire.version(END_TXN) >= EPOCH_BUMPING_END_TXN:
        assert producer.end(False) == ErrorCode.none
        assert producer.epoch == epoch + 1, producer
    else:
        assert producer.end(False) == ErrorCode.invalid_txn_state
        assert producer.epoch == epoch


def test_a_produce_to_a_partition_not_added_is_refused_up_to_v11(
        txn: Transactions, txn_topic: Callable[..., str],
        kafka_names: Callable[[str], str]) -> None:
    """A transactional Produce (v11 or below) to a partition not added to the transaction is refused — TRANSACTION_ABORTABLE, INVALID_TXN_STATE before KIP-1050 — and nothing is appended [KIP-890 part 1, "verification"; KIP-1050].

    The leader asks the coordinator (AddPartitionsToTxn v4, verify only) before it appends.
    Measured: Kafka 3.9 and 4.4 both answer TRANSACTION_ABORTABLE.
    """  # noqa: E501
    topic = txn_topic(2)
    producer = txn.producer(kafka_names("txn"))
    producer.begin(topic, 0)
    answer = producer.send(topic, [b"not-added"], partition=1,
                           version=min(txn.wire.version(PRODUCE), LAST_VERIFIED_PRODUCE))
    assert code(answer) in {ErrorCode.transaction_abortable, ErrorCode.invalid_txn_state}, answer
    assert txn.wire.list_offset(topic, -1, partition=1).offset == 0, "the batch was appended"
    assert [t.partitions for t in txn.describe(producer.transactional_id).topics] == [(0,)]


def test_a_produce_v12_adds_its_partition_to_the_transaction(
        txn: Transactions, txn_topic: Callable[..., str],
        kafka_names: Callable[[str], str]) -> None:
    """From Produce v12, on a cluster at transaction version 2, a transactional batch to a partition not yet added adds it: appended, and DescribeTransactions lists it [KIP-890 part 2].

    Measured on Kafka 4.4 (Produce v13, ``transaction.version`` 2 finalized); Kafka 3.9 has
    neither and skips.
    """  # noqa: E501
    version = implicit_add_version(txn.wire)
    topic = txn_topic(2)
    producer = txn.producer(kafka_names("txn"))
    producer.begin(topic, 0)
    answer = producer.send(topic, [b"implicit"], partition=1, version=version)
    assert (code(answer), answer.base_offset) == (ErrorCode.none, 0), answer
    partitions = [p for t in txn.describe(producer.transactional_id).topics
                  for p in t.partitions]
    assert sorted(partitions) == [0, 1], partitions
    producer.commit()


def test_add_partitions_v4_verifies_without_adding(
        txn: Transactions, txn_topic: Callable[..., str],
        kafka_names: Callable[[str], str]) -> None:
    """AddPartitionsToTxn v4+ is the brokers' batched request: ``verify_only`` answers whether each partition is in the transaction — NONE if added, TRANSACTION_ABORTABLE if not (INVALID_TXN_STATE before KIP-1050) — and adds nothing [KIP-890 part 1].

    Clients keep to v3. Measured: without an authorizer, Kafka 3.9 and 4.4 both serve a
    client's v4 as a broker's (the CLUSTER_ACTION check passes), so this checks the answer.
    """  # noqa: E501
    txn.wire.version(ADD_PARTITIONS_TO_TXN, at_least=VERIFYING_ADD_PARTITIONS)
    topic = txn_topic(2)
    producer = txn.producer(kafka_names("txn"))
    refused = {ErrorCode.transaction_abortable, ErrorCode.invalid_txn_state}
    assert set(producer.verify_partitions(topic, 0).values()) <= refused
    producer.begin(topic, 0)
    assert producer.verify_partitions(topic, 0) == {0: ErrorCode.none}
    assert set(producer.verify_partitions(topic, 1).values()) <= refused
    assert [t.partitions for t in txn.describe(producer.transactional_id).topics] == [(0,)]
