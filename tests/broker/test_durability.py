"""Restart, kill -9 and torn tails: acknowledged data survives; old data comes from disk."""

import os
import signal
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from harness.cluster.peers import ReferenceBroker
from harness.raw_client import RawClient
from harness.wire.records import build_batch

from .conftest import create_topic
from .test_confluent_client import consume, produce
from .test_raw_protocol import INIT_PID
from .test_raw_protocol import produce as raw_produce


def test_restart_reads_everything_back_from_disk(tmp_path):
    run_dir = tmp_path / "b"
    broker = ReferenceBroker(run_dir).start()
    try:
        topic = create_topic(broker.bootstrap, partitions=2)
        values = [f"durable-{i}".encode() for i in range(1000)]
        delivered = produce(broker.bootstrap, topic, values, acks="all")
    finally:
        assert broker.stop() == 0
    broker.start()  # same run dir, same port, same files
    try:
        per_partition = {p: sum(1 for q, _ in delivered if q == p) for p in (0, 1)}
        got = consume(broker.bootstrap, topic, per_partition[0]) + consume(
            broker.bootstrap, topic, per_partition[1], partition=1)
        assert sorted(m.value() for m in got) == sorted(values)
        assert min(m.offset() for m in got) == 0  # offset 0 is read back after the restart
    finally:
        broker.stop()


def _segments(data_dir: Path, topic: str) -> list[Path]:
    return sorted((data_dir / f"{topic}-0").glob("*.log"))


def test_kill_9_mid_produce_then_recover(tmp_path):
    run_dir = tmp_path / "b"
    broker = ReferenceBroker(run_dir, properties={"log.flush.interval.messages": 1}).start()
    topic = create_topic(broker.bootstrap)
    acked: list[tuple[int, bytes]] = []
    stop = threading.Event()

    def keep_producing():
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all",
                             "linger.ms": 2, "retries": 0, "message.timeout.ms": 3000})

        def on_delivery(err, msg):
            if err is None:
                acked.append((msg.offset(), msg.value()))

        i = 0
        while not stop.is_set():
            producer.produce(topic, value=f"k9-{i}".encode(), on_delivery=on_delivery)
            producer.poll(0)
            i += 1
            if i % 200 == 0:
                time.sleep(0.01)
        producer.flush(5)

    thread = threading.Thread(target=keep_producing)
    thread.start()
    deadline = time.monotonic() + 20
    while len(acked) < 3000 and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(broker.pid, signal.SIGKILL)
    stop.set()
    thread.join(30)
    broker.stop()
    assert broker.returncode == -signal.SIGKILL
    assert len(acked) >= 3000
    # A crash can also tear the last write: simulate it by appending half a batch of garbage.
    segment = _segments(broker.data_dir, topic)[-1]
    with open(segment, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x10\x00\x00\x00\x01\x00" + os.urandom(40))
    broker.start()
    try:
        got = consume(broker.bootstrap, topic, len(acked))
        by_offset = {m.offset(): m.value() for m in got}
        missing = [(o, v) for o, v in acked if by_offset.get(o) != v]
        assert missing == []
        log_text = broker.log_path.read_text()
        assert "truncat" in log_text.lower()
    finally:
        broker.stop()


def test_idempotent_retry_after_restart_is_still_deduplicated(tmp_path):
    broker = ReferenceBroker(tmp_path / "b").start()
    try:
        topic = create_topic(broker.bootstrap)
        with RawClient(broker.host, broker.port) as raw:
            init = raw.request(INIT_PID, 4, {"transactional_id": None,
                                             "transaction_timeout": 60000,
                                             "producer_id": -1, "producer_epoch": -1})
            batch = build_batch([(None, b"once")], producer_id=init.producer_id,
                                producer_epoch=init.producer_epoch, base_sequence=0)
            first = raw_produce(raw, topic, batch)
        os.kill(broker.pid, signal.SIGKILL)  # no clean shutdown: state comes from the log
        broker.stop()
        broker.start()
        with RawClient(broker.host, broker.port) as raw:
            retry = raw_produce(raw, topic, batch)
            assert (retry.error_code.value, retry.base_offset) == (0, first.base_offset)
            after = raw_produce(raw, topic, build_batch(
                [(None, b"next")], producer_id=init.producer_id,
                producer_epoch=init.producer_epoch, base_sequence=1))
            assert after.base_offset == first.base_offset + 1
    finally:
        broker.stop()


def test_retention_by_size_advances_the_log_start_offset(tmp_path):
    broker = ReferenceBroker(tmp_path / "b", properties={
        "log.retention.check.interval.ms": 200}).start()
    try:
        topic = create_topic(broker.bootstrap, config={
            "segment.bytes": "4096", "retention.bytes": "8192"})
        produce(broker.bootstrap, topic, [b"r" * 200 for _ in range(300)], acks="all",
                **{"linger.ms": 0, "batch.num.messages": 5})
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "x"})
        deadline = time.monotonic() + 15
        low = 0
        while time.monotonic() < deadline and low == 0:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)
            time.sleep(0.2)
        consumer.close()
        assert low > 0 and high == 300
        assert len(_segments(broker.data_dir, topic)) <= 4
    finally:
        broker.stop()
