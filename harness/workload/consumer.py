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
one per partition, with the member id and generation librdkafka holds at that moment; a revoke
is ``info`` when librdkafka says the partitions were *lost* (the coordinator fenced the member,
or its session expired): the member learns it late, and another may own them already. Commit
rows are one per partition with the committed position (next offset to read).

Group consumers speak the classic group protocol or KIP-848's consumer protocol
(:mod:`harness.workload.group_protocol`); every group row names it (``group_protocol``), and its
``generation`` is the group's generation under the first and the member's own epoch under the
second.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from harness.waiting import wait_for
from harness.workload.context import QUIET, RunContext
from harness.workload.group_protocol import CLASSIC_ONLY, GroupProtocol
from harness.workload.kinds import Isolation
from harness.workload.outcomes import commit_outcome, error_name

MODES = ("assign", "group")
COMMITS = ("auto", "after", "before")
_GROUP_METADATA_MAGIC = b"CGMDv2:"


def group_generation(consumer: Consumer) -> int:
    """The group generation librdkafka holds (classic protocol) or the member's epoch (consumer
    protocol), -1 if unknown.

    confluent-kafka exposes it only inside the serialized consumer group metadata (made for
    transactional producers): ``CGMDv2:`` then the generation as a 32-bit integer in the
    host's byte order, the group id and the member id. Under ``group.protocol=consumer``
    librdkafka 2.16 keeps the member epoch of each ConsumerGroupHeartbeat response in that same
    field (measured against Kafka 4.4: 0 while joining, then the epoch the coordinator gives,
    which stays unchanged while the member revokes and goes up once it has).
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


def open_group_coordinator(bootstrap: str, group: str, topic: str, *,
                           timeout_s: float = 60.0) -> None:
    """Ask for ``group``'s committed offset of ``topic``-0 once, before a run's clock starts.

    Kafka creates its offsets topic (50 partitions by default) when a group's coordinator is
    first looked up: on a small machine that held up a short run's first group members for
    seconds. Asked again while the answer is an error (NOT_COORDINATOR while the topic's
    partitions are being loaded); ClusterWaitTimeout when none came in time.
    """
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False, **QUIET})
    try:
        wait_for(lambda: consumer.committed([TopicPartition(topic, 0)], timeout=10), timeout_s,
                 f"the coordinator of group {group}", retry_on=(KafkaException,))
    finally:
        consumer.close()


@dataclass(frozen=True)
class ConsumerSpec:
    """One consumer's settings.

    ``assignment`` (assign mode): the (topic, partition) pairs to read, from the beginning; empty
    means every partition of ``topics``. ``crash_after_commits``: a planted fault for tests — the
    process exits abruptly (no close, no further rows) right after its N-th commit returns.
    ``isolation``: the ``isolation.level`` to ask for and to record on every poll row; None
    leaves librdkafka's default and the column null (the first workload's histories).
    """

    bootstrap: str
    topics: tuple[str, ...]
    mode: str = "group"
    group: str | None = "workload"
    commit: str = "after"
    assignment: tuple[tuple[str, int], ...] = ()
    max_records: int = 100
    poll_timeout_s: float = 0.5
    session_timeout_ms: int = 10_000  # classic protocol only: KIP-848's is the broker's
    auto_commit_interval_ms: int = 1_000
    crash_after_commits: int | None = None
    config: dict[str, Any] = field(default_factory=dict)
    group_protocol: GroupProtocol = GroupProtocol.CLASSIC
    isolation: Isolation | None = None

    def __post_init__(self) -> None:
        if self.isolation is not None:  # JSON carries the value
            object.__setattr__(self, "isolation", Isolation(self.isolation))
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}; got {self.mode!r}")
        if self.commit not in COMMITS:
            raise ValueError(f"commit must be one of {', '.join(COMMITS)}; got {self.commit!r}")
        if self.mode == "group" and not self.group:
            raise ValueError("group mode needs a group")
        try:  # the spec also arrives as JSON, where the protocol is its value
            object.__setattr__(self, "group_protocol", GroupProtocol(self.group_protocol))
        except ValueError:
            raise ValueError(f"group_protocol must be one of {', '.join(GroupProtocol)}; got "
                             f"{self.group_protocol!r}") from None
        if self.group_protocol is GroupProtocol.CONSUMER:
            if self.mode != "group":
                raise ValueError("the consumer group protocol needs group mode: an assign-mode "
                                 "consumer joins no group")
            refused = sorted(CLASSIC_ONLY & set(self.config))
            if refused:
                raise ValueError(f"{', '.join(refused)}: not for the consumer group protocol "
                                 f"(librdkafka refuses them under group.protocol=consumer)")

    @property
    def history_group(self) -> str | None:
        """The group rows name: none for assign mode, whatever group.id librdkafka needs."""
        return self.group if self.mode == "group" else None

    @property
    def history_group_protocol(self) -> str | None:
        """The protocol group rows name; none for assign mode, which joins no group."""
        return self.group_protocol.value if self.mode == "group" else None

    def client_config(self, process: int) -> dict[str, Any]:
        config: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group if self.mode == "group" else f"assign-{process}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": self.mode == "group" and self.commit == "auto",
            "auto.commit.interval.ms": self.auto_commit_interval_ms,
            "enable.partition.eof": False,
            **QUIET,
        }
        if self.group_protocol is GroupProtocol.CONSUMER:
            config["group.protocol"] = GroupProtocol.CONSUMER.value
        else:
            config["session.timeout.ms"] = self.session_timeout_ms
        if self.isolation is not None:
            config["isolation.level"] = self.isolation.value
        return {**config, **self.config}


class RecordingConsumer:
    def __init__(self, spec: ConsumerSpec, context: RunContext) -> None:
        self.spec = spec
        self.context = context
        self.group = spec.history_group
        self.group_protocol = spec.history_group_protocol
        self.recorder = context.recorder()
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

    def _group_fields(self) -> dict[str, Any]:
        """The columns every row of this consumer's group carries: the group, its protocol,
        the member id and the generation (or member epoch) librdkafka holds now."""
        member, generation = self._member()
        return {"group": self.group, "group_protocol": self.group_protocol, "member": member,
                "generation": generation}

    def _record_change(self, f: str, partitions: Iterable[TopicPartition], *,
                       lost: bool = False) -> None:
        fields = self._group_fields()
        type_ = "ok"
        if lost:  # when the ownership ended is not known: an info row, as an unknown outcome is
            type_, fields["error"] = "info", error_name(KafkaError(KafkaError._ASSIGNMENT_LOST))
        op = self.recorder.next_op()
        for tp in sorted(partitions, key=lambda tp: (tp.topic, tp.partition)):
            self.recorder.record(type_, f, op, topic=tp.topic, partition=tp.partition, **fields)

    def _on_assign(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._record_change("assign", partitions)

    def _on_revoke(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._record_change("revoke", partitions)

    def _on_lost(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """librdkafka revokes without asking: the member was fenced (its heartbeat refused, its
        session expired) and may have lost the partitions to another member some time ago."""
        self._record_change("revoke", partitions, lost=True)

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
                       fields: dict[str, Any]) -> None:
        op = self.recorder.next_op()
        for tp in sorted(partitions, key=lambda tp: (tp.topic, tp.partition)):
            failure = tp.error or error
            if failure is None and tp.offset < 0:
                continue  # nothing consumed there yet: librdkafka committed no position
            if failure is None:
                self.recorder.record("ok", "commit", op, topic=tp.topic, partition=tp.partition,
                                     offset=tp.offset, **fields)
            else:
                self.recorder.record(commit_outcome(failure.code()), "commit", op,
                                     topic=tp.topic, partition=tp.partition,
                                     offset=tp.offset if tp.offset >= 0 else None,
                                     error=error_name(failure), **fields)

    def _on_auto_commit(self, error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        if self.spec.commit != "auto" or (error and error.code() == KafkaError._NO_OFFSET):
            return
        self._record_commit(partitions, error, self._group_fields())

    def _commit(self, positions: dict[tuple[str, int], int]) -> None:
        fields = self._group_fields()
        partitions = [TopicPartition(t, p, o) for (t, p), o in sorted(positions.items())]
        try:
            done = self.consumer.commit(offsets=partitions, asynchronous=False)
        except KafkaException as exc:
            self._record_commit(partitions, exc.args[0], fields)
        else:
            self._record_commit(done or partitions, None, fields)
        self.commits += 1
        crash_at = self.spec.crash_after_commits
        if crash_at is not None and self.commits >= crash_at:
            os._exit(70)  # the planted crash: no close, no leave, nothing more recorded

    # --- reading ---------------------------------------------------------------------------

    def _record_reads(self, op: int, started_ns: int, messages: list, *,
                      txn: int | None = None) -> None:
        """One poll's rows; ``txn`` is the producer transaction the poll was made in."""
        fields: dict[str, Any] = {**self._group_fields(), "txn": txn}
        if self.spec.isolation is not None:
            fields["isolation"] = self.spec.isolation.value
        self.recorder.record("invoke", "poll", op, time_ns=started_ns, **fields)
        for message in messages:
            key = message.key()
            self.recorder.record("ok", "poll", op, topic=message.topic(),
                                 partition=message.partition(), offset=message.offset(),
                                 key=None if key is None else key.decode(errors="replace"),
                                 value=message.value().decode(errors="replace"), **fields)

    def consume(self) -> tuple[int, list[Message], dict[tuple[str, int], int]]:
        """One consume call: (when it started, the records it returned, the next position to
        read of each t/p they came from). Raises on a fatal error of the client."""
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
        positions: dict[tuple[str, int], int] = {}
        for message in records:
            topic, partition, offset = message.topic(), message.partition(), message.offset()
            if topic is None or partition is None or offset is None:
                raise RuntimeError(f"a consumed record without topic, partition or offset: "
                                   f"{topic}-{partition}@{offset}")
            positions[(topic, partition)] = offset + 1
        return started_ns, records, positions

    def poll_once(self) -> int:
        started_ns, records, positions = self.consume()
        if not records:
            return 0
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
                                        on_revoke=self._on_revoke, on_lost=self._on_lost)
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
