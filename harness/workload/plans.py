"""Which client processes a run of each workload kind starts: the roles the generator launches.

The first workload's roles are :meth:`WorkloadSpec.roles`; the transactional kinds reuse its
load settings (bootstrap, counts, rate, the consumers' group and protocol) and add what a
transaction needs — ids, the abort share, a seed for it — so ``--producers``, ``--consumers`` and
``--rate`` mean the same for every kind.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from harness.workload.client import ClientSpec
from harness.workload.consumer import ConsumerSpec, open_group_coordinator
from harness.workload.generator import WorkloadSpec
from harness.workload.kinds import (
    DEFAULT_ABORT_P,
    Isolation,
    TxnIdPolicy,
    WorkloadKind,
    workload_topics,
)
from harness.workload.transactions import TxnProducerSpec, TxnSettings, open_coordinator
from harness.workload.transform import ProcessorSpec

UNCOMMITTED_GROUP_SUFFIX = "-uncommitted"


def uncommitted_readers(consumers: int) -> int:
    """How many of a transactions run's consumers read uncommitted: a third (at least one once
    there are two), so the read_committed group always has most of them. They form a group of
    their own, so each group's redelivery and exclusivity are judged within one isolation."""
    return 0 if consumers < 2 else max(1, consumers // 3)


@dataclass(frozen=True)
class Plan:
    """A run's workload: its kind, the load (``base``: its topics are ignored, the kind names
    them from ``topic``), the partitions of every topic, and the transaction settings.
    ``id_prefix`` (the run id) starts every transactional.id, so runs never share one."""

    kind: WorkloadKind
    base: WorkloadSpec
    topic: str
    partitions: int
    id_prefix: str
    abort_p: float = DEFAULT_ABORT_P
    id_policy: TxnIdPolicy = TxnIdPolicy.FRESH
    seed: int = 0
    # librdkafka settings every transactional client gets on top of its own: a nemesis that
    # needs clients whose requests time out fast (delayed-end-txn) says so here.
    txn_config: Mapping[str, Any] = field(default_factory=dict)
    send_gap_s: float = 0.0  # between the sends of a transaction (TxnProducerSpec.send_gap_s)
    end_gap_s: float = 0.0  # between its last send and its end (TxnProducerSpec.end_gap_s)

    @property
    def topics(self) -> tuple[str, ...]:
        return workload_topics(self.kind, self.topic)

    def prepare(self) -> None:
        """What must exist before a transactional kind's clients start: Kafka's transaction
        and offsets topics, which it makes on first use (:func:`open_coordinator`,
        :func:`open_group_coordinator`), so a short run's clock does not pay for them.
        ClusterWaitTimeout if no coordinator answers."""
        if self.kind.transactional:
            open_coordinator(self.base.bootstrap, f"{self.id_prefix}-prepare")
            open_group_coordinator(self.base.bootstrap, self.base.group, self.topic)

    def roles(self) -> list[tuple[str, ClientSpec]]:
        if self.kind is WorkloadKind.TRANSACTIONS:
            return self._transactions()
        if self.kind is WorkloadKind.CONSUME_TRANSFORM_PRODUCE:
            return self._consume_transform_produce()
        return list(replace(self.base, topics=self.topics).roles())

    def _transactions(self) -> list[tuple[str, ClientSpec]]:
        base = replace(self.base, topics=self.topics)
        roles: list[tuple[str, ClientSpec]] = [
            ("txn-producer", TxnProducerSpec(
                bootstrap=base.bootstrap, topics=self.topics, txn=self._txn(f"txn-{n}"),
                partitions=self.partitions, rate=base.rate / max(1, base.producers),
                send_gap_s=self.send_gap_s, end_gap_s=self.end_gap_s))
            for n in range(base.producers)]
        uncommitted = uncommitted_readers(base.consumers)
        for n in range(base.consumers):
            spec: ConsumerSpec = base.consumer_spec(n)
            if n < base.consumers - uncommitted:
                spec = replace(spec, isolation=Isolation.READ_COMMITTED)
            else:
                spec = replace(spec, isolation=Isolation.READ_UNCOMMITTED,
                               group=f"{base.group}{UNCOMMITTED_GROUP_SUFFIX}")
            roles.append(("consumer", spec))
        return roles

    def _consume_transform_produce(self) -> list[tuple[str, ClientSpec]]:
        source, sink = self.topics
        base = replace(self.base, topics=(source,))
        roles: list[tuple[str, ClientSpec]] = [("producer", base.producer_spec())
                                               for _ in range(base.producers)]
        roles += [("processor", ProcessorSpec(
            bootstrap=base.bootstrap, input_topic=source, output_topic=sink, group=base.group,
            txn=self._txn(f"processor-{n}"), group_protocol=base.group_protocol))
            for n in range(base.consumers)]
        return roles

    def _txn(self, slot: str) -> TxnSettings:
        """The transaction settings of one client slot: its transactional.id prefix is the
        run's and the slot's (a replacement takes the slot's)."""
        return TxnSettings(f"{self.id_prefix}-{slot}", self.id_policy, self.abort_p, self.seed,
                           config=dict(self.txn_config))
