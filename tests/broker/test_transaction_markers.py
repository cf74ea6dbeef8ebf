"""The log side of transactions over the wire: transactional produce, WriteTxnMarkers, the last
stable offset in Fetch and ListOffsets, aborted transactions, a real read_committed consumer,
and a kill -9 in the middle of a transaction.

The coordinator is played by this test: it takes a producer id from InitProducerId (no
transactional id), writes transactional batches with it and sends WriteTxnMarkers itself.
"""

import os
import signal

from confluent_kafka import Consumer, TopicPartition

from harness.cluster.peers import ReferenceBroker
from harness.raw_client import RawClient
from harness.waiting import wait_for
from harness.wire.records import build_batch, decode_records, iter_headers

from .conftest import create_topic
from .test_raw_protocol import fetch_body, produce, produce_body

PRODUCE, INIT_PRODUCER_ID, WRITE_TXN_MARKERS, FETCH, LIST_OFFSETS = 0, 22, 27, 1, 2
TRANSACTIONAL_ID = "raw-txn"  # what Kafka requires of a request carrying transactional records
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
LATEST = -1
COORDINATOR_EPOCH = 4


class TxnProducer:
    """A producer id and its sequence, writing transactional batches over the raw client."""

    def __init__(self, raw: RawClient) -> None:
        init = raw.request(INIT_PRODUCER_ID, 4, {"transactional_id": None,
                                                 "transaction_timeout": 60000,
                                                 "producer_id": -1, "producer_epoch": -1})
        assert init.error_code.value == 0
        self.raw, self.pid, self.epoch, self.seq = raw, init.producer_id, init.producer_epoch, 0

    def send(self, topic: str, *values: bytes) -> int:
        batch = build_batch([(None, v) for v in values], producer_id=self.pid,
                            producer_epoch=self.epoch, base_sequence=self.seq,
                            transactional=True)
        body = produce_body(topic, batch)
        body["transactional_id"] = TRANSACTIONAL_ID
        part = self.raw.request(PRODUCE, 9, body).responses[0].partition_responses[0]
        assert part.error_code.value == 0, part
        self.seq += len(values)
        return part.base_offset


def write_marker(raw, topic, pid, epoch, *, commit, partitions=(0,),
                 coordinator_epoch=COORDINATOR_EPOCH):
    """WriteTxnMarkers for one producer; the error code of each partition, by index."""
    response = raw.request(WRITE_TXN_MARKERS, 1, {"markers": [{
        "producer_id": pid, "producer_epoch": epoch, "transaction_result": commit,
        "topics": [{"name": topic, "partition_indexes": list(partitions)}],
        "coordinator_epoch": coordinator_epoch}]})
    (marker,) = response.markers
    assert marker.producer_id == pid
    (result,) = marker.topics
    return {p.partition_index: p.error_code.value for p in result.partitions}


def latest(raw, topic, isolation):
    response = raw.request(LIST_OFFSETS, 5, {"replica_id": -1, "isolation_level": isolation,
                                             "topics": [{"name": topic, "partitions": [
                                                 {"partition_index": 0, "timestamp": LATEST,
                                                  "current_leader_epoch": -1}]}]})
    part = response.topics[0].partitions[0]
    assert part.error_code.value == 0
    return part.offset


def fetch(raw, topic, offset, isolation):
    body = fetch_body(topic, offset)
    body["isolation_level"] = isolation
    part = raw.request(FETCH, 11, body).responses[0].partitions[0]
    assert part.error_code.value == 0
    return part


def values_of(records: bytes, *, skip_control=True) -> list[bytes]:
    out = []
    for header in iter_headers(records):
        if header.is_control and skip_control:
            continue
        batch = records[header.position:header.position + header.size]
        out.extend(r.value for r in decode_records(batch))
    return out


def test_an_open_transaction_holds_back_the_stable_offset_until_its_commit(broker):
    topic = create_topic(broker.bootstrap)
    with RawClient(broker.host, broker.port) as raw:
        produce(raw, topic, build_batch([(None, b"plain")]))  # offset 0
        txn = TxnProducer(raw)
        first = txn.send(topic, b"t1", b"t2")  # 1-2
        assert first == 1
        assert latest(raw, topic, READ_UNCOMMITTED) == 3
        assert latest(raw, topic, READ_COMMITTED) == 1
        held = fetch(raw, topic, 0, READ_COMMITTED)
        assert (held.high_watermark, held.last_stable_offset) == (3, 1)
        assert values_of(held.records) == [b"plain"]
        assert list(held.aborted_transactions) == []
        uncommitted = fetch(raw, topic, 0, READ_UNCOMMITTED)
        assert uncommitted.last_stable_offset == 1
        assert uncommitted.aborted_transactions is None
        assert values_of(uncommitted.records) == [b"plain", b"t1", b"t2"]

        assert write_marker(raw, topic, txn.pid, txn.epoch, commit=True) == {0: 0}
        assert latest(raw, topic, READ_COMMITTED) == latest(raw, topic, READ_UNCOMMITTED) == 4
        done = fetch(raw, topic, 0, READ_COMMITTED)
        assert done.last_stable_offset == 4
        assert values_of(done.records) == [b"plain", b"t1", b"t2"]
        *_, marker = iter_headers(done.records)
        assert marker.is_control and marker.base_offset == 3  # the marker takes an offset


def test_an_abort_is_listed_and_a_read_committed_consumer_skips_it(broker):
    topic = create_topic(broker.bootstrap)
    with RawClient(broker.host, broker.port) as raw:
        aborted, committed = TxnProducer(raw), TxnProducer(raw)
        a_first = aborted.send(topic, b"a1")  # 0
        committed.send(topic, b"c1")  # 1
        aborted.send(topic, b"a2")  # 2
        produce(raw, topic, build_batch([(None, b"p1")]))  # 3: held back by both
        assert latest(raw, topic, READ_COMMITTED) == 0
        assert write_marker(raw, topic, aborted.pid, aborted.epoch, commit=False) == {0: 0}
        assert latest(raw, topic, READ_COMMITTED) == 1  # the committed one is still open
        assert write_marker(raw, topic, committed.pid, committed.epoch, commit=True) == {0: 0}
        assert latest(raw, topic, READ_COMMITTED) == 6
        part = fetch(raw, topic, 0, READ_COMMITTED)
        assert [(t.producer_id, t.first_offset) for t in part.aborted_transactions] == \
            [(aborted.pid, a_first)]
        assert fetch(raw, topic, 5, READ_COMMITTED).aborted_transactions == ()
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{topic}",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        seen: list[bytes] = []

        def read_all() -> bool:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                seen.append(message.value())
            return len(seen) >= 2 and consumer.position(
                [TopicPartition(topic, 0)])[0].offset >= 6

        wait_for(read_all, 20, "the read_committed consumer reaching the log end")
        assert seen == [b"c1", b"p1"]
    finally:
        consumer.close()


def test_transactional_records_need_a_transactional_id(broker):
    topic = create_topic(broker.bootstrap)
    with RawClient(broker.host, broker.port) as raw:
        txn = TxnProducer(raw)
        batch = build_batch([(None, b"x")], producer_id=txn.pid, producer_epoch=txn.epoch,
                            base_sequence=0, transactional=True)
        assert produce(raw, topic, batch).error_code.value == 53  # TRANSACTIONAL_ID_AUTH...
        assert latest(raw, topic, READ_UNCOMMITTED) == 0


def test_marker_errors_are_per_partition(broker):
    topic = create_topic(broker.bootstrap, partitions=1)
    with RawClient(broker.host, broker.port) as raw:
        txn = TxnProducer(raw)
        txn.send(topic, b"x")
        assert write_marker(raw, topic, txn.pid, txn.epoch, commit=True, partitions=(0, 7)) \
            == {0: 0, 7: 3}  # UNKNOWN_TOPIC_OR_PARTITION
        assert write_marker(raw, f"{topic}-missing", txn.pid, txn.epoch, commit=True) == {0: 3}
        assert write_marker(raw, topic, txn.pid, txn.epoch - 1, commit=True) == {0: 47}
        assert write_marker(raw, topic, txn.pid, txn.epoch, commit=False,
                            coordinator_epoch=COORDINATOR_EPOCH - 1) == {0: 52}


def test_a_kill_mid_transaction_keeps_it_open_and_its_abort_hidden(tmp_path):
    broker = ReferenceBroker(tmp_path / "b").start()
    try:
        topic = create_topic(broker.bootstrap)
        with RawClient(broker.host, broker.port) as raw:
            produce(raw, topic, build_batch([(None, b"before")]))  # 0
            txn = TxnProducer(raw)
            txn.send(topic, b"doomed")  # 1
            produce(raw, topic, build_batch([(None, b"after")]))  # 2
            assert latest(raw, topic, READ_COMMITTED) == 1
        os.kill(broker.pid, signal.SIGKILL)  # no clean shutdown: no snapshot at close
        broker.stop()
        assert broker.returncode == -signal.SIGKILL
        broker.start()
        with RawClient(broker.host, broker.port) as raw:
            assert latest(raw, topic, READ_COMMITTED) == 1
            assert write_marker(raw, topic, txn.pid, txn.epoch, commit=False) == {0: 0}
            part = fetch(raw, topic, 0, READ_COMMITTED)
            assert [(t.producer_id, t.first_offset) for t in part.aborted_transactions] == \
                [(txn.pid, 1)]
            assert latest(raw, topic, READ_COMMITTED) == 4
        broker.stop()
        broker.start()  # a clean restart keeps the abort indexed
        with RawClient(broker.host, broker.port) as raw:
            part = fetch(raw, topic, 0, READ_COMMITTED)
            assert [(t.producer_id, t.first_offset) for t in part.aborted_transactions] == \
                [(txn.pid, 1)]
    finally:
        broker.stop()
