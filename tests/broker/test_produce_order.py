"""A connection's Produce requests append in the order they arrived, even when one of them
waits for the transaction coordinator (KIP-890 verification of a transaction's first batch in
a partition).

Kafka reads no further request of a connection until it has answered the one in hand, so a
producer's pipelined requests (max.in.flight.requests.per.connection = 5) are appended in the
order it sent them, and its sequence numbers arrive in order. This broker overlaps a
connection's requests; a Produce that waits for verification must still not let a later
Produce of the same connection append first. Found by the perf benchmark's transactional
producer: ProducerPerformance writing to partitions another transactional producer had written
failed with OUT_OF_ORDER_SEQUENCE_NUMBER, its next batch for an open partition having been
appended ahead of the earlier batch that waited behind a new partition's verification.
"""

from __future__ import annotations

from harness.raw_client import RawClient
from harness.wire import protocol
from harness.wire.errors import ErrorCode
from harness.wire.records import build_batch

from .conftest import create_topic
from .test_transaction_markers import PRODUCE, READ_UNCOMMITTED, TxnProducer, fetch, values_of
from .test_transactions import add_partitions

PRODUCE_VERSION = 9


def _frame(client_id: str, correlation_id: int, transactional_id: str,
           batches: dict[str, bytes]) -> bytes:
    return protocol.encode_request(
        api_key=PRODUCE, api_version=PRODUCE_VERSION, correlation_id=correlation_id,
        client_id=client_id, body={
            "transactional_id": transactional_id, "acks": -1, "timeout": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}
                           for topic, batch in batches.items()]})


def test_a_produce_waiting_for_verification_is_not_overtaken_by_the_next_one(broker) -> None:
    opened, added = create_topic(broker.bootstrap), create_topic(broker.bootstrap)
    with RawClient(broker.host, broker.port) as raw:
        txn = TxnProducer(raw)
        assert txn.send(opened, b"a0") == 0  # the transaction is open in `opened`: seq 0
        with RawClient(*txn.coordinator) as coordinator:
            assert add_partitions(coordinator, txn.transactional_id, txn.pid, txn.epoch,
                                  added) == ErrorCode.none

        def batch(value: bytes, sequence: int) -> bytes:
            return build_batch([(None, value)], producer_id=txn.pid, producer_epoch=txn.epoch,
                               base_sequence=sequence, transactional=True)

        # One write, so both requests are in the broker before it answers either: the first
        # holds `added`'s first batch (which waits for verification) and `opened`'s seq 1,
        # the second `opened`'s seq 2 alone (which needs no verification).
        raw.send_raw(
            _frame("order", 101, txn.transactional_id,
                   {opened: batch(b"a1", 1), added: batch(b"b0", 0)})
            + _frame("order", 102, txn.transactional_id, {opened: batch(b"a2", 2)}))
        answers = []
        for expected in (101, 102):
            correlation, response = raw.receive(PRODUCE, PRODUCE_VERSION)
            assert correlation == expected
            answers.append({t.name: (ErrorCode(p.error_code), p.base_offset)
                            for t in response.responses for p in t.partition_responses})
        assert answers == [{opened: (ErrorCode.none, 1), added: (ErrorCode.none, 0)},
                           {opened: (ErrorCode.none, 2)}]
        assert values_of(fetch(raw, opened, 0, READ_UNCOMMITTED).records) == [b"a0", b"a1", b"a2"]
