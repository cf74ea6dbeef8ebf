"""Transactions on a 3-broker ZooKeeper-mode cluster of reference brokers: followers copy the
markers byte for byte and rebuild the producer state and the aborted-transaction index from
them, so a new leader holds the same last stable offset and lists the same aborts (Kafka's
followers run the same ProducerStateManager update on replicated batches)."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, NewTopic

from harness.raw_client import RawClient
from harness.wire.records import build_batch
from tests.broker.test_raw_protocol import produce
from tests.broker.test_transaction_markers import (
    COORDINATOR_EPOCH,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    TxnProducer,
    fetch,
    latest,
    values_of,
    write_marker,
)

TOPIC = "txn"


def _files(cluster, broker_id: int, suffix: str) -> bytes:
    directory = cluster.broker(broker_id).data_dir / f"{TOPIC}-0"
    return b"".join(path.read_bytes() for path in sorted(directory.glob(f"*{suffix}")))


def test_a_new_leader_has_the_open_transaction_and_the_aborted_index(cluster):
    session_ms = 4000
    c = cluster(brokers=3, zookeeper_session_timeout_ms=session_ms)
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, replica_assignment=[[1, 2, 3]])])[TOPIC].result(30)
    c.wait_for(lambda: (s := c.partition_state(TOPIC, 0)) and len(s["isr"]) == 3, 30,
               "all three replicas in the ISR")
    leader = c.broker(1)
    with RawClient("127.0.0.1", leader.port) as raw:
        aborted, committed, still_open = TxnProducer(raw), TxnProducer(raw), TxnProducer(raw)
        aborted.send(TOPIC, b"a1", b"a2")  # 0-1
        committed.send(TOPIC, b"c1")  # 2
        assert write_marker(raw, TOPIC, aborted.pid, aborted.epoch, commit=False) == {0: 0}  # 3
        assert write_marker(raw, TOPIC, committed.pid, committed.epoch, commit=True) == {0: 0}
        open_first = still_open.send(TOPIC, b"o1")  # 5
        produce(raw, TOPIC, build_batch([(None, b"p1")]))  # 6
        assert latest(raw, TOPIC, READ_COMMITTED) == open_first == 5
        assert latest(raw, TOPIC, READ_UNCOMMITTED) == 7

    def replicas_agree() -> bool:
        logs = [_files(c, b, ".log") for b in (1, 2, 3)]
        indexes = [_files(c, b, ".txnindex") for b in (1, 2, 3)]
        return len(set(logs)) == 1 and len(set(indexes)) == 1 and len(indexes[0]) == 34

    c.wait_for(replicas_agree, 30, "byte-identical logs and .txnindex files on the replicas")

    c.kill(1)
    state = c.wait_for(lambda: (s := c.partition_state(TOPIC, 0)) and s["leader"] in (2, 3)
                       and s, session_ms / 1000 + 15, "a new leader for txn-0")
    new_leader = c.broker(state["leader"])
    with RawClient("127.0.0.1", new_leader.port) as raw:
        c.wait_for(lambda: latest(raw, TOPIC, READ_UNCOMMITTED) == 7, 20,
                   "the new leader's high watermark at the log end")
        assert latest(raw, TOPIC, READ_COMMITTED) == 5  # the open transaction came across
        part = fetch(raw, TOPIC, 0, READ_COMMITTED)
        assert [(t.producer_id, t.first_offset) for t in part.aborted_transactions] == \
            [(aborted.pid, 0)]
        # the coordinator epoch of the last markers came across too
        assert write_marker(raw, TOPIC, committed.pid, committed.epoch, commit=True,
                            coordinator_epoch=COORDINATOR_EPOCH - 1) == {0: 52}
        assert write_marker(raw, TOPIC, still_open.pid, still_open.epoch, commit=True) \
            == {0: 0}
        assert latest(raw, TOPIC, READ_COMMITTED) == 8
        readable = fetch(raw, TOPIC, 0, READ_COMMITTED)
        # what a read_committed client keeps: the records outside the aborted transaction
        assert values_of(readable.records) == [b"a1", b"a2", b"c1", b"o1", b"p1"]
        assert [(t.producer_id, t.first_offset) for t in readable.aborted_transactions] == \
            [(aborted.pid, 0)]
