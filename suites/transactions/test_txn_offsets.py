"""Offsets committed in a transaction: TxnOffsetCommit and require_stable (KIP-98, KIP-447)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from harness.wire.errors import ErrorCode

from ..offsets._helpers import commit
from ._helpers import FIND_COORDINATOR, TXN_OFFSET_COMMIT, Transactions, transaction_version

IMPLICIT_ADD_OFFSETS = 5  # TxnOffsetCommit v5 adds the offsets partition itself (KIP-890 part 2)

pytestmark = pytest.mark.requires_transactions


def test_transactional_offsets_are_unstable_until_the_commit(
        txn: Transactions, txn_topic: Callable[..., str],
        kafka_names: Callable[[str], str]) -> None:
    """An offset committed with TxnOffsetCommit is invisible until the transaction commits: OffsetFetch answers the group's previous offset, and with ``require_stable`` UNSTABLE_OFFSET_COMMIT for the partition; after the commit it answers the new offset [KIP-98, "TxnOffsetCommitRequest"; KIP-447, "require_stable"].

    The group first has offset 3 from a plain OffsetCommit (a consumer outside the group).
    AddOffsetsToTxn comes first, as a client sends it, so the coordinator writes a marker to
    the group's offsets partition.
    """  # noqa: E501
    topic, group = txn_topic(1), kafka_names("group")
    assert commit(txn.group_coordinator(group), group, topic, {0: 3}) == [ErrorCode.none]
    producer = txn.producer(kafka_names("txn"))
    assert producer.add_offsets(group) == ErrorCode.none
    assert producer.commit_offsets(group, topic, {0: 7}) == {0: ErrorCode.none}

    assert txn.committed(group, topic, require_stable=False) == (3, ErrorCode.none)
    offset, error = txn.committed(group, topic, require_stable=True)
    assert error == ErrorCode.unstable_offset_commit, (offset, error)

    producer.commit()
    assert txn.stable_committed(group, topic) == (7, ErrorCode.none)


def test_an_aborted_transaction_leaves_the_group_offsets_as_they_were(
        txn: Transactions, txn_topic: Callable[..., str],
        kafka_names: Callable[[str], str]) -> None:
    """An abort drops the transaction's offsets: the group keeps the offset it had, and a group that had none still has none [KIP-98, "TxnOffsetCommitRequest"; GroupMetadata's pending transactional offsets].

    Partition 0 had offset 5; partition 1 had no offset (-1). Both are committed in the
    transaction, which aborts.
    """  # noqa: E501
    topic, group = txn_topic(2), kafka_names("group")
    assert commit(txn.group_coordinator(group), group, topic, {0: 5}) == [ErrorCode.none]
    producer = txn.producer(kafka_names("txn"))
    assert producer.add_offsets(group) == ErrorCode.none
    assert producer.commit_offsets(group, topic, {0: 9, 1: 9}) == {0: ErrorCode.none,
                                                                   1: ErrorCode.none}
    producer.abort()
    assert txn.stable_committed(group, topic, 0) == (5, ErrorCode.none)
    assert txn.stable_committed(group, topic, 1) == (-1, ErrorCode.none)


def test_txn_offset_commit_before_add_offsets_to_txn(
        txn: Transactions, txn_topic: Callable[..., str],
        kafka_names: Callable[[str], str]) -> None:
    """TxnOffsetCommit for a group whose offsets partition is not in the transaction is refused up to v4 — TRANSACTION_ABORTABLE, INVALID_TXN_STATE before KIP-1050 — and from v5, at transaction version 2, adds that partition to the transaction itself [KIP-890 parts 1 and 2; KIP-1050].

    Measured: Kafka 3.9 (v4) answers TRANSACTION_ABORTABLE and the transaction stays Empty;
    Kafka 4.4 (v5, ``transaction.version`` 2) answers NONE and DescribeTransactions lists the
    ``__consumer_offsets`` partition.
    """  # noqa: E501
    topic, group = txn_topic(1), kafka_names("group")
    producer = txn.producer(kafka_names("txn"))
    answer = producer.commit_offsets(group, topic, {0: 4})
    implicit = (txn.wire.version(TXN_OFFSET_COMMIT) >= IMPLICIT_ADD_OFFSETS
                and transaction_version(txn.wire) >= 2)
    if implicit:
        assert answer == {0: ErrorCode.none}
        state = txn.describe(producer.transactional_id)
        assert [t.topic for t in state.topics] == ["__consumer_offsets"], state
        producer.commit()
        assert txn.stable_committed(group, topic) == (4, ErrorCode.none)
    else:
        assert set(answer.values()) <= {ErrorCode.transaction_abortable,
                                        ErrorCode.invalid_txn_state}, answer
        assert txn.committed(group, topic, require_stable=True) == (-1, ErrorCode.none)
        state = txn.describe(producer.transactional_id)
        assert (state.transaction_state, state.topics) == ("Empty", ()), state


@pytest.mark.requires_multi_broker
def test_txn_offset_commit_at_a_broker_not_coordinating_the_group_is_not_coordinator(
        txn: Transactions, txn_topic: Callable[..., str],
        kafka_names: Callable[[str], str]) -> None:
    """TxnOffsetCommit sent to a broker that does not coordinate the group is NOT_COORDINATOR, whatever the producer's transaction: the group is checked before the transaction is verified [GroupCoordinator.handleTxnCommitOffsets: validateGroupStatus, then the KIP-890 verification].

    The producer never added the group's offsets partition, so verification alone would refuse
    the commit (TRANSACTION_ABORTABLE or INVALID_TXN_STATE) — a client told that aborts, where
    NOT_COORDINATOR only sends it to the coordinator.
    """  # noqa: E501
    topic, group = txn_topic(1), kafka_names("group")
    producer = txn.producer(kafka_names("txn"))
    txn.group_coordinator(group)  # waits until the group's coordinator serves it
    version = txn.wire.version(FIND_COORDINATOR)
    found = txn.wire.bootstrap.request(FIND_COORDINATOR, version, {
        "key": group, "key_type": 0, "coordinator_keys": [group]})
    coordinator = (found.coordinators[0] if version >= 4 else found).node_id
    other = next(b for b in txn.wire.metadata().brokers if b.node_id != coordinator)
    elsewhere = txn.wire.connect(f"{other.host}:{other.port}")
    answer = producer.commit_offsets(group, topic, {0: 4}, at=elsewhere)
    assert answer == {0: ErrorCode.not_coordinator}, (coordinator, other.node_id, answer)
