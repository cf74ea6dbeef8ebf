"""The final read: after every fault is healed, read each partition from the beginning to its
high watermark with a fresh assign-mode consumer, so every acknowledged write can be looked for.

Without it the checker could only say "unseen" for a write the workload's consumers never got to;
with it, a write still missing is a ``lost_write``. Each partition gets its own consumer and its
own process number; rows carry no group (an assign-mode reader redelivers nothing).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from harness.waiting import wait_for
from harness.workload.context import QUIET
from harness.workload.recorder import Recorder


@dataclass(frozen=True)
class PartitionRead:
    topic: str
    partition: int
    process: int
    high_watermark: int
    records: int
    complete: bool  # reached the high watermark before the timeout


def read_partition(bootstrap: str, topic: str, partition: int, recorder: Recorder, *,
                   timeout_s: float = 60.0, max_records: int = 1000) -> PartitionRead:
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"final-read-{recorder.run_id}-{recorder.process}",
        "enable.auto.commit": False,
        "enable.partition.eof": False,
        **QUIET,
    })
    records = 0
    try:
        # Right after a leadership change the client may still ask the old leader, which
        # answers NOT_LEADER_OR_FOLLOWER (Apache Kafka does, after an unclean election), or
        # hold metadata from a broker that had just started and did not know the topic yet
        # (librdkafka then says "Unknown partition" until its next refresh, minutes away). Each
        # try asks for the topic's metadata afresh, as a client does after such an answer.
        def high_watermark() -> tuple[int, int]:
            consumer.list_topics(topic, timeout=5.0)
            return consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                  timeout=5.0, cached=False)

        _, high = wait_for(high_watermark, timeout_s,
                           f"the high watermark of {topic}-{partition}")
        tp = TopicPartition(topic, partition, OFFSET_BEGINNING)
        consumer.assign([tp])
        assign_op = recorder.next_op()
        recorder.record("ok", "assign", assign_op, topic=topic, partition=partition)
        position = 0
        deadline = time.monotonic() + timeout_s
        while position < high and time.monotonic() < deadline:
            started = recorder.now_ns()
            messages = [m for m in consumer.consume(max_records, timeout=0.5) if m.error() is None]
            if not messages:
                continue
            op = recorder.next_op()
            recorder.record("invoke", "poll", op, time_ns=started)
            for message in messages:
                key, value, offset = message.key(), message.value(), message.offset()
                if value is None or offset is None:
                    raise ValueError(f"{topic}-{partition} holds a record without a value "
                                     f"(offset {offset}); the workload writes none")
                recorder.record("ok", "poll", op, topic=topic, partition=partition,
                                offset=offset,
                                key=None if key is None else key.decode(errors="replace"),
                                value=value.decode(errors="replace"))
                position = max(position, offset + 1)
            records += len(messages)
    finally:
        consumer.close()
    return PartitionRead(topic, partition, recorder.process, high, records, position >= high)


def final_read(bootstrap: str, partitions: list[tuple[str, int]], history_dir: Path | str,
               run_id: str, run_start_ns: int, first_process: int, *,
               timeout_s: float = 60.0) -> list[PartitionRead]:
    """Read every (topic, partition) to its high watermark; process numbers from first_process."""
    results = []
    for index, (topic, partition) in enumerate(partitions):
        with Recorder(history_dir, run_id, first_process + index, run_start_ns) as recorder:
            results.append(read_partition(bootstrap, topic, partition, recorder,
                                          timeout_s=timeout_s))
    return results
