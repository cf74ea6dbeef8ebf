"""The final read: after every fault is healed, read each partition from the beginning to its
high watermark with a fresh assign-mode consumer, so every acknowledged write can be looked for.

Without it the checker could only say "unseen" for a write the workload's consumers never got to;
with it, a write still missing is a ``lost_write``. Each partition gets its own consumer and its
own process number; rows carry no group (an assign-mode reader redelivers nothing).

After a transactional workload the read is read_committed (every poll row says so), and it first
waits — bounded — until each partition's last stable offset (LSO) has reached its high
watermark: until then a transaction is still open there (a dead client's, which its coordinator
aborts once ``transaction.timeout.ms`` passes, or one a successor's ``init_transactions``
completes), and a read_committed consumer stops at the LSO, short of every record after the
open transaction's first. :class:`StableWait` says what was waited for and whether it held.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, IsolationLevel, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from harness.waiting import ClusterWaitTimeout, wait_for
from harness.workload.context import QUIET
from harness.workload.kinds import Isolation
from harness.workload.recorder import Recorder


@dataclass(frozen=True)
class PartitionRead:
    topic: str
    partition: int
    process: int
    high_watermark: int
    records: int
    complete: bool  # reached the high watermark before the timeout
    isolation: str | None = None  # read_committed after a transactional workload


@dataclass(frozen=True)
class StableWait:
    """How long the final read waited for every partition's last stable offset to reach its
    high watermark (no transaction open), and the partitions where it did not in time."""

    waited_s: float
    timeout_s: float
    unstable: tuple[str, ...]  # "topic-partition: LSO x < high watermark y"

    @property
    def stable(self) -> bool:
        return not self.unstable

    def as_dict(self) -> dict[str, object]:
        """What run.json says of the wait (``final_wait``)."""
        return {**asdict(self), "stable": self.stable, "description": self.describe()}

    def describe(self) -> str:
        what = "every partition's last stable offset to reach its high watermark (no open " \
               "transaction holding it back)"
        if self.stable:
            return f"the final read waited {self.waited_s:.1f} s for {what}"
        return (f"the final read waited {self.timeout_s:.0f} s for {what}, in vain for "
                f"{', '.join(self.unstable)}: read_committed it stops at the LSO")


def _end_offsets(admin: AdminClient, partitions: list[tuple[str, int]],
                 isolation: IsolationLevel) -> dict[tuple[str, int], int]:
    asked = {TopicPartition(t, p): OffsetSpec.latest() for t, p in partitions}
    futures = admin.list_offsets(asked, isolation_level=isolation, request_timeout=10)
    return {(tp.topic, tp.partition): future.result().offset for tp, future in futures.items()}


def wait_until_stable(bootstrap: str, partitions: list[tuple[str, int]], *,
                      timeout_s: float = 60.0) -> StableWait:
    """Wait until, for every (topic, partition), ListOffsets answers the same latest offset
    read_committed (the LSO) as read_uncommitted (the high watermark)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    started = time.monotonic()
    last: list[str] = []

    def stable() -> bool:
        committed = _end_offsets(admin, partitions, IsolationLevel.READ_COMMITTED)
        written = _end_offsets(admin, partitions, IsolationLevel.READ_UNCOMMITTED)
        last[:] = [f"{t}-{p}: LSO {committed[(t, p)]} < high watermark {written[(t, p)]}"
                   for t, p in partitions if committed[(t, p)] < written[(t, p)]]
        return not last

    try:
        wait_for(stable, timeout_s, "every last stable offset at its high watermark",
                 interval=0.5)
    except ClusterWaitTimeout:
        return StableWait(time.monotonic() - started, timeout_s, tuple(last) or ("unknown",))
    return StableWait(time.monotonic() - started, timeout_s, ())


def read_partition(bootstrap: str, topic: str, partition: int, recorder: Recorder, *,
                   timeout_s: float = 60.0, max_records: int = 1000,
                   isolation: Isolation | None = None) -> PartitionRead:
    """Read one partition from its start to its end: the high watermark, or read_committed the
    last stable offset (the end of the partition librdkafka reports, past any aborted records
    and transaction markers, whose offsets no record is read at)."""
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": f"final-read-{recorder.run_id}-{recorder.process}",
        "enable.auto.commit": False,
        "enable.partition.eof": isolation is not None,
        **QUIET,
    }
    if isolation is not None:
        config["isolation.level"] = isolation.value
    level = None if isolation is None else isolation.value  # every poll row's isolation
    consumer = Consumer(config)
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
            consumed = consumer.consume(max_records, timeout=0.5)
            messages = [m for m in consumed if m.error() is None]
            for end in consumed:
                error = end.error()
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    position = max(position, end.offset() or 0)
            if not messages:
                continue
            op = recorder.next_op()
            recorder.record("invoke", "poll", op, time_ns=started, isolation=level)
            for message in messages:
                key, value, offset = message.key(), message.value(), message.offset()
                if value is None or offset is None:
                    raise ValueError(f"{topic}-{partition} holds a record without a value "
                                     f"(offset {offset}); the workload writes none")
                recorder.record("ok", "poll", op, topic=topic, partition=partition,
                                offset=offset,
                                key=None if key is None else key.decode(errors="replace"),
                                value=value.decode(errors="replace"), isolation=level)
                position = max(position, offset + 1)
            records += len(messages)
    finally:
        consumer.close()
    return PartitionRead(topic, partition, recorder.process, high, records, position >= high,
                         level)


def final_read(bootstrap: str, partitions: list[tuple[str, int]], history_dir: Path | str,
               run_id: str, run_start_ns: int, first_process: int, *,
               timeout_s: float = 60.0, isolation: Isolation | None = None
               ) -> list[PartitionRead]:
    """Read every (topic, partition) to its end; process numbers from first_process."""
    results = []
    for index, (topic, partition) in enumerate(partitions):
        with Recorder(history_dir, run_id, first_process + index, run_start_ns) as recorder:
            results.append(read_partition(bootstrap, topic, partition, recorder,
                                          timeout_s=timeout_s, isolation=isolation))
    return results
