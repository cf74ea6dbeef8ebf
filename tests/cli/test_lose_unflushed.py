"""lose-unflushed keeps exactly what the broker had recorded as flushed, and nothing else."""

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from harness.cluster.peers import ReferenceBroker
from harness.nemesis.process import lose_unflushed, read_recovery_points
from harness.wire.records import decode_records, iter_headers
from reference_broker.log.log_config import LogConfig
from reference_broker.log.unified_log import UnifiedLog

# A writer that appends through the broker's own log code and then dies without closing it:
# 5 flushed batches of 3 records (checkpointed), then 10 more batches over several small
# segments (rolled, so their snapshots exist), then half a batch — a torn write. t-1 gets
# records but never a checkpoint entry.
WRITER = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    from harness.wire.records import build_batch, read_header
    from reference_broker.log.checkpoint_file import write_checkpoint
    from reference_broker.log.log_config import LogConfig
    from reference_broker.log.unified_log import UnifiedLog

    data = Path(sys.argv[1])
    config = LogConfig(segment_bytes=400)
    logs = {p: UnifiedLog.open(data / f"t-{p}", config) for p in (0, 1)}

    def append(log, batch_no):
        values = [(None, f"v{batch_no}-{i}".encode()) for i in range(3)]
        batch = bytearray(build_batch(values, producer_id=7, producer_epoch=0,
                                      base_sequence=batch_no * 3))
        log.append_as_leader(batch, read_header(batch), leader_epoch=0)

    for n in range(5):
        append(logs[0], n)
        append(logs[1], n)
    logs[0].flush()
    write_checkpoint(data / "recovery-point-offset-checkpoint", {("t", 0): logs[0].recovery_point})
    for n in range(5, 15):
        append(logs[0], n)
    last = logs[0].segments[-1].log_path
    with open(last, "ab") as torn:
        torn.write(build_batch([(None, b"torn")], base_offset=logs[0].log_end_offset)[:30])
    print(logs[0].recovery_point, logs[0].log_end_offset, len(logs[0].segments), flush=True)
    os._exit(0)
""")


def _values_on_disk(partition_dir: Path) -> list[bytes]:
    values = []
    for segment in sorted(partition_dir.glob("*.log")):
        data = segment.read_bytes()
        for header in iter_headers(data):
            batch = data[header.position : header.position + header.size]
            values.extend(record.value for record in decode_records(batch))
    return values


def test_cuts_each_partition_back_to_its_recovery_point(tmp_path):
    data = tmp_path / "data"
    out = subprocess.run([sys.executable, "-c", WRITER, str(data)], check=True,
                         capture_output=True, text=True, timeout=60).stdout.split()
    recovery_point_in_memory, log_end, segments = map(int, out)
    assert read_recovery_points(data / "recovery-point-offset-checkpoint") == {("t", 0): 15}
    assert segments > 2 and log_end == 45 and recovery_point_in_memory > 15
    partition = data / "t-0"
    assert any(int(p.stem) > 15 for p in partition.glob("*.snapshot"))

    report = lose_unflushed(data)

    cut = report["t-0"]
    assert cut["recovery_point"] == 15
    assert cut["log_end_before"] == 45 and cut["log_end_after"] == 15
    assert cut["offsets_lost"] == 30
    assert cut["segments_deleted"] and all(base > 15 for base in cut["segments_deleted"])
    assert cut["bytes_cut"] > 0
    assert all(int(p.stem) <= 15 for p in partition.glob("*.log"))
    assert all(int(p.stem) <= 15 for p in partition.glob("*.snapshot"))
    assert _values_on_disk(partition) == [f"v{n}-{i}".encode() for n in range(5)
                                          for i in range(3)]
    # No checkpoint entry: nothing was recorded as flushed, so nothing is kept.
    assert report["t-1"]["recovery_point"] == 0 and report["t-1"]["log_end_after"] == 0
    assert _values_on_disk(data / "t-1") == []

    log = UnifiedLog.open(partition, LogConfig(segment_bytes=400), recovery_point=15)
    try:
        assert log.log_end_offset == 15
        assert log.producer_state.get(7).last_seq == 14  # the lost batches left no trace
    finally:
        log.close()


def test_a_second_cut_changes_nothing(tmp_path):
    data = tmp_path / "data"
    subprocess.run([sys.executable, "-c", WRITER, str(data)], check=True,
                   capture_output=True, timeout=60)
    lose_unflushed(data)
    again = lose_unflushed(data)
    assert again["t-0"]["offsets_lost"] == 0 and again["t-0"]["bytes_cut"] == 0


def test_an_empty_checkpoint_records_no_recovery_point(tmp_path):
    """Apache Kafka creates the checkpoint file empty at start-up and reads it as no entries;
    a damaged one is still refused, since the fault could not say what it cut."""
    checkpoint = tmp_path / "recovery-point-offset-checkpoint"
    checkpoint.write_text("")
    assert read_recovery_points(checkpoint) == {}
    checkpoint.write_text("7\n1\nt 0 5\n")
    with pytest.raises(ValueError, match="not a version 0 offset checkpoint"):
        read_recovery_points(checkpoint)


def test_refuses_something_that_is_not_a_log_dir(tmp_path):
    with pytest.raises(FileNotFoundError):
        lose_unflushed(tmp_path / "missing")


_QUIET = {"log.connection.close": False}


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 0, **_QUIET})
    acked = []
    for value in values:
        producer.produce(topic, value=value,
                         on_delivery=lambda err, msg: acked.append(err is None))
        producer.flush(10)  # one batch per record, so the segments roll often
    assert acked == [True] * len(values)


def _consume_all(bootstrap: str, topic: str, settle_s: float = 3.0) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "lose-unflushed",
                         "enable.auto.commit": False, "enable.partition.eof": True, **_QUIET})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is None:
                values.append(message.value())
            elif message.error().code() == -191:  # _PARTITION_EOF: read up to the end
                break
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=settle_s)
    finally:
        consumer.close()
    assert high == len(values)
    return values


def test_a_broker_restarted_on_the_cut_dir_serves_exactly_the_flushed_records(tmp_path):
    """Flushed = what the broker checkpointed at its clean stop; the records produced after the
    restart were acknowledged (acks=all) but never recorded as flushed, so they go."""
    broker = ReferenceBroker(tmp_path / "broker", properties={"log.segment.bytes": 300})
    flushed = [f"flushed-{i}".encode() for i in range(20)]
    later = [f"later-{i}".encode() for i in range(20)]
    broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("t", 1, 1)])["t"].result(timeout=10)
        _produce(broker.bootstrap, "t", flushed)
        assert broker.stop() == 0  # clean: flush, checkpoint recovery points
        broker.start()
        _produce(broker.bootstrap, "t", later)
        assert _consume_all(broker.bootstrap, "t") == flushed + later
        broker.kill()

        report = lose_unflushed(broker.data_dir)
        assert report["t-0"]["log_end_after"] == 20 and report["t-0"]["offsets_lost"] == 20

        broker.start()
        assert _consume_all(broker.bootstrap, "t") == flushed
    finally:
        broker.stop()
