"""Restart, kill -9 and torn tails: acknowledged data survives; old data comes from disk."""

import os
import signal
import threading
import time
from pathlib import Path

from confluent_kafka import Producer

from harness.cluster.peers import ReferenceBroker

from .conftest import create_topic
from .test_confluent_client import consume, produce


def test_restart_reads_everything_back_from_disk(tmp_path):
    run_dir = tmp_path / "b"
    broker = ReferenceBroker(run_dir).start()
    try:
        topic = create_topic(broker.bootstrap, partitions=2)
        values = [f"durable-{i}".encode() for i in range(1000)]
        produce(broker.bootstrap, topic, values, acks="all")
    finally:
        assert broker.stop() == 0
    broker.start()  # same run dir, same port, same files
    try:
        got = consume(broker.bootstrap, topic, 1000 // 2) + consume(
            broker.bootstrap, topic, 1000 // 2, partition=1)
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
