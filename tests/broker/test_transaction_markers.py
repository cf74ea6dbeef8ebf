"""The log side of transactions over the wire: transactional produce, WriteTxnMarkers, the last
stable offset in Fetch and ListOffsets, aborted transactions, a real read_committed consumer,
and a kill -9 in the middle of a transaction.

The markers are the test's: each producer has a real transactional id and adds its partitions
with the coordinator (the leader verifies a transaction's first batch with it, KIP-890 part 1),
but the test writes the batches and sends WriteTxnMarkers itself, never EndTxn, so that it
controls what each partition's log holds.
"""

import os
import signal
import uuid

from confluent_kafka import Consumer, TopicPartition

from harness.cluster.peers import ReferenceBroker
from harness.raw_client import RawClient
from harness.waiting import wait_for
from harness.wire.errors import ErrorCode
from harness.wire.records import build_batch, decode_records, iter_headers

from .conftest import create_topic
from .test_raw_protocol import fetch_body, produce, produce_body
from .test_transactions import FIND_COORDINATOR, WAIT_S, add_partitions, init

PRODUCE, WRITE_TXN_MARKERS, FETCH, LIST_OFFSETS = 0, 27, 1, 2
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
LATEST = -1
COORDINATOR_EPOCH = 4


class TxnProducer:
    """A transactional producer writing its batches over the raw client (to the partition's
    leader); its InitProducerId and AddPartitionsToTxn go to its coordinator, wherever that is,
    over a connection of their own closed at once."""

    def __init__(self, raw: RawClient) -> None:
        self.transactional_id = f"raw-txn-{uuid.uuid4().hex[:12]}"
        found = wait_for(lambda: (r := raw.request(FIND_COORDINATOR, 3, {
            "key": self.transactional_id, "key_type": 1})).error_code == ErrorCode.none and r,
            WAIT_S, f"the coordinator of {self.transactional_id}")
        self.coordinator = (found.host, found.port)
        with RawClient(*self.coordinator) as coordinator:
            answer = init(coordinator, self.transactional_id)
        assert answer.error_code == ErrorCode.none, answer
        self.raw, self.pid, self.epoch, self.seq = raw, answer.producer_id, \
            answer.producer_epoch, 0
        self.added: set[str] = set()

    def send(self, topic: str, *values: bytes) -> int:
        if topic not in self.added:  # partition 0 joins the transaction before its first batch
            with RawClient(*self.coordinator) as coordinator:
                assert add_partitions(coordinator, self.transactional_id, self.pid,
                                      self.epoch, topic) == ErrorCode.none
            self.added.add(topic)
        batch = build_batch([(None, v) for v in values], producer_id=self.pid,
                            producer_epoch=self.epoch, base_sequence=self.seq,
                            transactional=True)
        body = produce_body(topic, batch)
        body["transactional_id"] = self.transactional_id

        def produced():
            # NOT_ENOUGH_REPLICAS: the leader could not reach the coordinator to verify the
            # batch yet (a busy cluster); nothing was appended and a producer sends it again.
            part = self.raw.request(PRODUCE, 9, body).responses[0].partition_responses[0]
            return None if part.error_code == ErrorCode.not_enough_replicas else part

        part = wait_for(produced, WAIT_S, f"{self.transactional_id}'s batch appended")
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
