"""Write the controller's leadership decisions to ZooKeeper, partition by partition.

Each operation asks a pure election (:mod:`~reference_broker.controller.election`) who should
lead given the state the controller knows, writes the resulting state conditionally on the
znode version it knows, and records what was written in the context. A version conflict means
a leader changed its ISR in between: the state is re-read and the decision taken again on the
fresh state. Every write is fenced by the controller epoch's znode version, so a deposed
controller's write fails with ``ControllerMovedError`` (which the caller answers by resigning).

Synchronous: it runs on the controller's single ZooKeeper thread, one event at a time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from kazoo.exceptions import NodeExistsError

from reference_broker.controller.controller_context import ControllerContext
from reference_broker.controller.election import (
    controlled_shutdown_partition_leader_election,
    offline_partition_leader_election,
    preferred_replica_partition_leader_election,
    reassign_partition_leader_election,
)
from reference_broker.controller.state_changes import (
    bumped_state,
    elected_state,
    initial_state,
    state_without_replica,
    unclean_leader_election_enabled,
)
from reference_broker.log.topic_partition import TopicPartition
from reference_broker.zk.kafka_zk_client import KafkaZkClient
from reference_broker.zk.topic_zk import PartitionStateConflictError
from reference_broker.zk.topic_znodes import LeaderIsrAndControllerEpoch

log = logging.getLogger("reference_broker.controller.state_change")

Decision = Callable[[TopicPartition, LeaderIsrAndControllerEpoch],
                    LeaderIsrAndControllerEpoch | None]


class PartitionStateMachine:
    def __init__(self, zk: KafkaZkClient, context: ControllerContext,
                 unclean_leader_election_default: bool) -> None:
        self.zk = zk
        self.context = context
        self.unclean_default = unclean_leader_election_default

    # --- new partitions -----------------------------------------------------------------------

    def initialize(self, partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
        """Create the first state of partitions that have none; returns those created.

        A state that already exists (written by a previous controller a moment before it
        lost its seat) is adopted instead.
        """
        ctx = self.context
        created = []
        for tp in partitions:
            if tp in ctx.partition_states:
                continue
            state = initial_state(ctx.replicas(tp), ctx.live_broker_ids, ctx.epoch)
            if state is None:
                log.error("Controller %s: no replica of %s-%d (replicas %s) is alive; it stays "
                          "without a leader until one is", ctx.epoch, tp.topic, tp.partition,
                          list(ctx.replicas(tp)))
                continue
            try:
                version = self.zk.create_partition_state(
                    tp, state, controller_epoch_zk_version=ctx.epoch_zk_version)
            except NodeExistsError:
                existing = self.zk.get_partition_state(tp)
                if existing is not None:
                    ctx.put_state(tp, *existing)
                continue
            ctx.put_state(tp, state, version)
            created.append(tp)
        return created

    # --- elections ------------------------------------------------------------------------------

    def elect_offline(self, partitions: Iterable[TopicPartition], *,
                      allow_unclean: bool = False) -> list[TopicPartition]:
        """Elect a leader for partitions whose leader is not alive. Unclean only when the
        topic (overriding the broker) enables it — read now, so a runtime change counts — or
        ``allow_unclean`` (an unclean ElectLeaders request)."""
        ctx = self.context
        unclean_by_topic: dict[str, bool] = {}

        def unclean(topic: str) -> bool:
            if allow_unclean:
                return True
            if topic not in unclean_by_topic:
                unclean_by_topic[topic] = unclean_leader_election_enabled(
                    self.zk.get_topic_config(topic), self.unclean_default)
            return unclean_by_topic[topic]

        def decide(tp: TopicPartition, state: LeaderIsrAndControllerEpoch
                   ) -> LeaderIsrAndControllerEpoch | None:
            if ctx.is_replica_online(state.leader):
                return None
            election = offline_partition_leader_election(
                ctx.replicas(tp), state.isr, ctx.live_broker_ids, unclean(tp.topic))
            if not election.has_leader:
                log.error("Controller epoch %d: no eligible leader for %s-%d (ISR %s, live "
                          "replicas %s, unclean election disabled)", ctx.epoch, tp.topic,
                          tp.partition, list(state.isr), ctx.live_replicas(tp))
                return None
            if election.unclean:
                log.warning("Unclean leader election. Partition %s-%d has been assigned leader "
                            "%d from out-of-sync replicas (ISR was %s); records acknowledged by "
                            "the old ISR may be lost", tp.topic, tp.partition, election.leader,
                            list(state.isr))
            return elected_state(state, election, ctx.epoch)

        return self._write_all(partitions, decide)

    def elect_preferred(self, partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
        ctx = self.context

        def decide(tp: TopicPartition, state: LeaderIsrAndControllerEpoch
                   ) -> LeaderIsrAndControllerEpoch | None:
            election = preferred_replica_partition_leader_election(
                ctx.replicas(tp), state.isr, ctx.live_broker_ids)
            if not election.has_leader or election.leader == state.leader:
                return None
            return elected_state(state, election, ctx.epoch)

        return self._write_all(partitions, decide)

    def elect_controlled_shutdown(self, partitions: Iterable[TopicPartition]
                                  ) -> list[TopicPartition]:
        ctx = self.context

        def decide(tp: TopicPartition, state: LeaderIsrAndControllerEpoch
                   ) -> LeaderIsrAndControllerEpoch | None:
            if state.leader not in ctx.shutting_down_brokers:
                return None
            election = controlled_shutdown_partition_leader_election(
                ctx.replicas(tp), state.isr, ctx.live_or_shutting_down_broker_ids,
                ctx.shutting_down_brokers)
            if not election.has_leader:
                return None
            return elected_state(state, election, ctx.epoch)

        return self._write_all(partitions, decide)

    def elect_reassigned(self, partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
        """After a reassignment: a leader from the (new) assignment, or at least a new leader
        epoch so the replicas learn the new replica set."""
        ctx = self.context

        def decide(tp: TopicPartition, state: LeaderIsrAndControllerEpoch
                   ) -> LeaderIsrAndControllerEpoch | None:
            replicas = ctx.replicas(tp)
            if state.leader in replicas and ctx.is_replica_online(state.leader):
                return bumped_state(state, ctx.epoch)
            election = reassign_partition_leader_election(replicas, state.isr,
                                                          ctx.live_broker_ids)
            if not election.has_leader:
                return None
            return elected_state(state, election, ctx.epoch)

        return self._write_all(partitions, decide)

    # --- ISR ------------------------------------------------------------------------------------

    def remove_replica_from_isr(self, replica: int, partitions: Iterable[TopicPartition]
                                ) -> list[TopicPartition]:
        epoch = self.context.epoch
        return self._write_all(
            partitions, lambda _tp, state: state_without_replica(state, replica, epoch))

    def bump_leader_epoch(self, partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
        epoch = self.context.epoch
        return self._write_all(partitions, lambda _tp, state: bumped_state(state, epoch))

    # --- writing --------------------------------------------------------------------------------

    def _write_all(self, partitions: Iterable[TopicPartition], decide: Decision
                   ) -> list[TopicPartition]:
        return [tp for tp in partitions if self._write(tp, decide)]

    def _write(self, tp: TopicPartition, decide: Decision) -> bool:
        """Decide and write one partition, re-reading on conflict; True if a state was written."""
        ctx = self.context
        while True:
            state = ctx.partition_states.get(tp)
            if state is None:
                return False
            new_state = decide(tp, state)
            if new_state is None:
                return False
            try:
                version = self.zk.update_partition_state(
                    tp, new_state, ctx.partition_zk_versions[tp],
                    controller_epoch_zk_version=ctx.epoch_zk_version)
            except PartitionStateConflictError:
                fresh = self.zk.get_partition_state(tp)
                if fresh is None:
                    ctx.partition_states.pop(tp, None)
                    return False
                ctx.put_state(tp, *fresh)
                continue
            ctx.put_state(tp, new_state, version)
            log.info("Controller epoch %d: %s-%d leader %d epoch %d ISR %s", ctx.epoch, tp.topic,
                     tp.partition, new_state.leader, new_state.leader_epoch, list(new_state.isr))
            return True
