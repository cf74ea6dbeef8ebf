"""A consumer client that records what it reads, its assignment changes and its commits.

Two modes: ``assign`` (the client picks its partitions, no group: rows carry a null group) and
``group`` (subscribe; the group coordinator assigns). In group mode one of three commit
strategies, which is what the delivery guarantees hinge on:

* ``auto`` — librdkafka commits the consumed positions in the background;
* ``after`` — commit a poll's positions after its records are processed (at-least-once);
* ``before`` — commit them first, then process (at-most-once: a crash in between loses them).

"Processing" a record is recording its ``ok`` poll row, so a consumer killed between commit and
processing leaves exactly the trace a real application would: the group moved past records that
no poll ever read.

A poll that returns records is one ``invoke`` row (timed when the poll started) and one ``ok`` row
per record; an empty poll writes nothing. Rebalance callbacks write ``assign``/``revoke`` rows,
one per partition, with the member id and generation librdkafka holds at that moment. Commit rows
are one per partition with the committed position (next offset to read).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from harness.workload.context import QUIET, RunContext
from harness.workload.outcomes import commit_outcome, error_name
from harness.workload.recorder import Recorder

MODES = ("assign", "group")
COMMITS = ("auto", "after", "before")
_GROUP_METADATA_MAGIC = b"CGMDv2:"


def group_generation(consumer: Consumer) -> int:
    """The group generation librdkafka holds, -1 if unknown.

    confluent-kafka exposes it only inside the serialized consumer group metadata (made for
    transactional producers): ``CGMDv2:`` then the generation as a 32-bit integer in the
    host's byte order.
    """
    try:
        blob = consumer.consumer_group_metadata()
    except (KafkaException, RuntimeError):
        return -1
    if not isinstance(blob, bytes) or not blob.startswith(_GROUP_METADATA_MAGIC):
        return -1
    start = len(_GROUP_METADATA_MAGIC)
    (generation,) = struct.unpack("=i", blob[start:start + 4])
    return generation


@dataclass(frozen=True)
class ConsumerSpec:
    """One consumer's settings.

    ``assignment`` (assign mode): the (topic, partition) pairs to read, from the beginning; empty
    means every partition of ``topics``. ``crash_after_commits``: a planted fault for tests — the
    process exits abruptly (no close, no further rows) right after its N-th commit returns.
    """

    bootstrap: str
    topics: tuple[str, ...]
    mode: str = "group"
    group: str | None = "workload"
    commit: str = "after"
    assignment: tuple[tuple[str, int], ...] = ()
    max_records: int = 100
    poll_timeout_s: float = 0.5
    session_timeout_ms: int = 10_000
    auto_commit_interval_ms: int = 1_000
    crash_after_commits: int | None = None
    config: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}; got {self.mode!r}")
        if self.commit not in COMMITS:
            raise ValueError(f"commit must be one of {', '.join(COMMITS)}; got {self.commit!r}")
        if self.mode == "group" and not self.group:
            raise ValueError("group mode needs a group")

    @property
    def history_group(self) -> str | None:
        """The group rows name: none for assign mode, whatever group.id librdkafka needs."""
        return self.group if self.mode == "group" else None

    def client_config(self, process: int) -> dict[str, Any]:
        config: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group if self.mode == "group" else f"assign-{process}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": self.mode == "group" and self.commit == "auto",
            "auto.commit.interval.ms": self.auto_commit_interval_ms,
            "session.timeout.ms": self.session_timeout_ms,
            "enable.partition.eof": False,
            **QUIET,
        }
        return {**config, **self.config}


class RecordingConsumer:
    def __init__(self, spec: ConsumerSpec, context: RunContext) -> None:
        self.spec = spec
        self.context = context
        self.group = spec.history_group
        self.recorder = Recorder(context.history_dir, context.run_id, context.process,
                                 context.run_start_ns)
        config = spec.client_config(context.process)
        if spec.mode == "group":
            config["on_commit"] = self._on_auto_commit
        self.consumer = Consumer(config)
        self.commits = 0

    # --- identity --------------------------------------------------------------------------

    def _member(self) -> tuple[str | None, int]:
        if self.group is None:
            return None, -1
        try:
            member = self.consumer.memberid() or None
        except (KafkaException, RuntimeError):
            member = None
        return member, group_generation(self.consumer)

    # --- assignment ------------------------------------------------------------------------

    def _record_change(self, f: str, partitions: Iterable[TopicPartition]) -> None:
        member, generation = self._member()
        op = self.recorder.next_op()
        for tp in sorted(partitions, key=lambda tp: (tp.topic, tp.partition)):
            self.recorder.record("ok", f, op, topic=tp.topic, partition=tp.partition,
                                 group=self.group, member=member, generation=generation)

    def _on_assign(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._record_change("assign", partitions)

    def _on_revoke(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._record_change("revoke", partitions)

    def _assign_all(self) -> None:
        wanted = list(self.spec.assignment)
        if not wanted:
            metadata = self.consumer.list_topics(timeout=10)
            for topic in self.spec.topics:
                wanted += [(topic, p) for p in sorted(metadata.topics[topic].partitions)]
        partitions = [TopicPartition(t, p, OFFSET_BEGINNING) for t, p in wanted]
        self.consumer.assign(partitions)
        self._record_change("assign", partitions)

    # --- commits ---------------------------------------------------------------------------

    def _record_commit(self, partitions: Iterable[TopicPartition], error: KafkaError | None,
                       member: str | None, generation: int) -> None:
        op = self.recorder.next_op()
        for tp in sorted(partitions, key=lambda tp: (tp.topic, tp.partition)):
            failure = tp.error or error
            if failure is None and tp.offset < 0:
                continue  # nothing consumed there yet: librdkafka committed no position
            if failure is None:
                self.recorder.record("ok", "commit", op, topic=tp.topic, partition=tp.partition,
                                     offset=tp.offset, group=self.group, member=member,
                                     generation=generation)
            else:
                self.recorder.record(commit_outcome(failure.code()), "commit", op,
                                     topic=tp.topic, partition=tp.partition,
                                     offset=tp.offset if tp.offset >= 0 else None,
                                     group=self.group, member=member, generation=generation,
                                     error=error_name(failure))

    def _on_auto_commit(self, error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        if self.spec.commit != "auto" or (error and error.code() == KafkaError._NO_OFFSET):
            return
        self._record_commit(partitions, error, *self._member())

    def _commit(self, positions: dict[tuple[str, int], int]) -> None:
        member, generation = self._member()
        partitions = [TopicPartition(t, p, o) for (t, p), o in sorted(positions.items())]
        try:
            done = self.consumer.commit(offsets=partitions, asynchronous=False)
        except KafkaException as exc:
            self._record_commit(partitions, exc.args[0], member, generation)
        else:
            self._record_commit(done or partitions, None, member, generation)
        self.commits += 1
        crash_at = self.spec.crash_after_commits
        if crash_at is not None and self.commits >= crash_at:
            os._exit(70)  # the planted crash: no close, no leave, nothing more recorded

    # --- reading ---------------------------------------------------------------------------

    def _record_reads(self, op: int, started_ns: int, messages: list) -> None:
        member, generation = self._member()
        self.recorder.record("invoke", "poll", op, time_ns=started_ns, group=self.group,
                             member=member, generation=generation)
        for message in messages:
            key = message.key()
            self.recorder.record("ok", "poll", op, topic=message.topic(),
                                 partition=message.partition(), offset=message.offset(),
                                 key=None if key is None else key.decode(errors="replace"),
                                 value=message.value().decode(errors="replace"),
                                 group=self.group, member=member, generation=generation)

    def poll_once(self) -> int:
        started_ns = self.recorder.now_ns()
        messages = self.consumer.consume(num_messages=self.spec.max_records,
                                         timeout=self.spec.poll_timeout_s)
        records = []
        for message in messages:
            error = message.error()
            if error is None:
                records.append(message)
            elif error.fatal():
                raise KafkaException(error)
        if not records:
            return 0
        positions: dict[tuple[str, int], int] = {}
        for message in records:
            topic, partition, offset = message.topic(), message.partition(), message.offset()
            if topic is None or partition is None or offset is None:
                raise RuntimeError(f"a consumed record without topic, partition or offset: "
                                   f"{topic}-{partition}@{offset}")
            positions[(topic, partition)] = offset + 1
        op = self.recorder.next_op()
        manual = self.group is not None and self.spec.commit != "auto"
        if manual and self.spec.commit == "before":
            self._commit(positions)
        self._record_reads(op, started_ns, records)
        if manual and self.spec.commit == "after":
            self._commit(positions)
        return len(records)

    def run(self) -> int:
        try:
            if self.spec.mode == "group":
                self.consumer.subscribe(list(self.spec.topics), on_assign=self._on_assign,
                                        on_revoke=self._on_revoke, on_lost=self._on_revoke)
            else:
                self._assign_all()
            while self.context.remaining_s() > 0:
                self.poll_once()
            self.consumer.close()  # leaves the group; auto mode commits once more (recorded)
        finally:
            self.recorder.close()
        return 0


def run(spec: ConsumerSpec, context: RunContext) -> int:
    return RecordingConsumer(spec, context).run()
