"""The consume-transform-produce processor: Kafka's exactly-once stream processing, recorded.

Processors share one consumer group on the input topic. Each transaction reads one batch of
input records (read_committed), sends one output record per input record — ``derived_from``
naming the input value, ``group`` the processors' group — and adds the batch's next positions to
the transaction with ``send_offsets_to_transaction`` (KIP-447: the group's metadata rides along,
so a member fenced by a rebalance cannot commit), then commits, or aborts a share of them on
purpose. An output record and its input's offset commit are thus committed, or not, together.

What the processor does after each outcome is what an application must do:

* ``fail`` — Kafka's consumer does not rewind on abort (KAFKA-17582): the processor seeks every
  input partition it read inside the transaction back to the first offset it read there, so
  the batch is processed again;
* ``info`` — nobody knows whether the offsets moved: the process ends (its consumer leaves the
  group) and the generator's new process resumes from the group's committed offsets.
"""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import KafkaException, TopicPartition

from harness.workload.consumer import ConsumerSpec, RecordingConsumer
from harness.workload.context import RunContext
from harness.workload.group_protocol import GroupProtocol
from harness.workload.kinds import Isolation
from harness.workload.transactions import REPLACE_ME, TxnOutcome, TxnSettings


@dataclass(frozen=True)
class ProcessorSpec:
    """One processor's settings: ``input_topic`` → ``output_topic`` (the same number of
    partitions: an output goes to its input's partition number), at most ``max_records`` input
    records per transaction, and the transactional producer's settings (``txn``)."""

    bootstrap: str
    input_topic: str
    output_topic: str
    group: str
    txn: TxnSettings
    max_records: int = 100
    poll_timeout_s: float = 0.5
    session_timeout_ms: int = 10_000
    group_protocol: GroupProtocol = GroupProtocol.CLASSIC

    def __post_init__(self) -> None:
        try:  # the spec also arrives as JSON, where the protocol is its value
            object.__setattr__(self, "group_protocol", GroupProtocol(self.group_protocol))
        except ValueError:
            raise ValueError(f"group_protocol must be one of {', '.join(GroupProtocol)}; got "
                             f"{self.group_protocol!r}") from None

    def consumer_spec(self) -> ConsumerSpec:
        """The input side: a group member reading committed records, committing nothing by
        itself (its offsets go through the producer's transactions)."""
        return ConsumerSpec(bootstrap=self.bootstrap, topics=(self.input_topic,), mode="group",
                            group=self.group, commit="after", max_records=self.max_records,
                            poll_timeout_s=self.poll_timeout_s,
                            session_timeout_ms=self.session_timeout_ms,
                            group_protocol=self.group_protocol,
                            isolation=Isolation.READ_COMMITTED)


class Processor(RecordingConsumer):
    """A group consumer whose every non-empty poll becomes one transaction of outputs and
    offsets. The group rows (assign, revoke, poll) are the recording consumer's."""

    def __init__(self, spec: ProcessorSpec, context: RunContext) -> None:
        super().__init__(spec.consumer_spec(), context)
        self.processor = spec
        self.transactions, self.rng = spec.txn.start(spec.bootstrap, self.recorder)
        self.producer = self.transactions.producer

    def one_transaction(self) -> TxnOutcome | None:
        """Begin, wait for a batch of input (the run may end first: the empty transaction is
        then aborted), transform it, add its offsets, and commit or abort. None when the
        producer refused to begin."""
        txn = self.transactions.begin()
        if txn is None:
            return None
        started_ns, records, positions = self.consume()
        while not records and self.context.remaining_s() > 0:
            started_ns, records, positions = self.consume()
        if not records:
            return self.transactions.finish(abort=True)
        self._record_reads(self.recorder.next_op(), started_ns, records, txn=txn)
        first: dict[tuple[str, int], int] = {}
        for message in records:
            value = message.value()
            topic, partition, offset = message.topic(), message.partition(), message.offset()
            assert value is not None and topic is not None and partition is not None \
                and offset is not None  # consume() refused records without them
            first.setdefault((topic, partition), offset)
            output = f"{self.context.process}-{self.transactions.sent}"
            self.transactions.send(self.processor.output_topic, partition, output,
                                   derived_from=value.decode(errors="replace"), group=self.group)
        fields = self._group_fields()
        self.transactions.send_offsets(positions, self.consumer.consumer_group_metadata,
                                       fields)
        outcome = self.transactions.finish(abort=self.rng.random() < self.processor.txn.abort_p)
        if outcome is TxnOutcome.FAIL:
            self._rewind(first)
        return outcome

    def _rewind(self, first: dict[tuple[str, int], int]) -> None:
        """Seek each input t/p read inside an aborted transaction back to where it began. A t/p
        this member no longer owns is skipped: its new owner starts from the committed offset,
        which the aborted transaction did not move."""
        for (topic, partition), offset in sorted(first.items()):
            try:
                self.consumer.seek(TopicPartition(topic, partition, offset))
            except KafkaException:
                continue

    def run(self) -> int:
        """0 when the run ended; :data:`REPLACE_ME` after an ``info`` transaction or with a
        producer that cannot go on (the consumer is closed, leaving the group, either way)."""
        outcome: TxnOutcome | None = None
        try:
            self.transactions.init()
            self.consumer.subscribe([self.processor.input_topic], on_assign=self._on_assign,
                                    on_revoke=self._on_revoke, on_lost=self._on_lost)
            while self.context.remaining_s() > 0 and self.transactions.usable:
                outcome = self.one_transaction()
                if outcome is TxnOutcome.INFO:
                    break
            self.consumer.close()
        except KafkaException as exc:  # init failed, or the consumer's fatal error
            return self.transactions.end(exc)
        finally:
            self.transactions.settle()
            self.recorder.close()
        return 0 if self.transactions.usable and outcome is not TxnOutcome.INFO else REPLACE_ME


def run(spec: ProcessorSpec, context: RunContext) -> int:
    return Processor(spec, context).run()
