"""What the active controller does for each event (Kafka's ``ControllerEventProcessor``).

A broker joining, leaving or restarting, topics and partitions appearing, a leader's ISR change
notice, a topic's config change, the admin requests under ``/admin``, the periodic leader
rebalance, and the ControlledShutdown and ElectLeaders requests brokers send: each handler reads
ZooKeeper, updates the context, drives the partition state machine and collects the LeaderAndIsr
and UpdateMetadata requests that follow. A handler of an inactive controller returns at once.

:class:`ControllerEventProcessor` is a mixin of
:class:`~reference_broker.controller.kafka_controller.KafkaController`, which owns the state
these handlers use, runs them one at a time on its event queue and takes care of start-up,
election and failover; they are apart so that each module stays small and a reader finds "what
happens when a broker dies" without the machinery that delivers the event.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from harness.wire.errors import ErrorCode
from reference_broker.config import KafkaConfig
from reference_broker.controller.broker_requests import (
    controlled_shutdown,
    elect_leaders,
    rebalance_leaders,
)
from reference_broker.controller.channel_manager import ControllerChannelManager
from reference_broker.controller.controller_context import ControllerContext
from reference_broker.controller.partition_state_machine import PartitionStateMachine
from reference_broker.controller.reassignment import ReassignmentManager
from reference_broker.controller.request_batch import ControllerBrokerRequestBatch
from reference_broker.controller.topic_deletion import TopicDeletionManager
from reference_broker.log.topic_partition import TopicPartition
from reference_broker.zk.admin_znodes import ConfigEntityZNode
from reference_broker.zk.kafka_zk_client import KafkaZkClient

log = logging.getLogger("reference_broker.controller")


class ControllerEventProcessor:
    """The controller's event handlers; mixed into ``KafkaController``."""

    # KafkaController's state and helpers that the handlers use.
    config: KafkaConfig
    zk: KafkaZkClient
    context: ControllerContext
    channel: ControllerChannelManager
    _active: bool
    _psm: PartitionStateMachine
    _deletion: TopicDeletionManager
    _reassignment: ReassignmentManager
    _watched_topics: set[str]
    _last_config_change: str
    _new_batch: Callable[[], ControllerBrokerRequestBatch]
    _send: Callable[[ControllerBrokerRequestBatch], None]
    _after: Callable[..., None]
    _load_topic: Callable[[str], None]

    # --- ZooKeeper watches and admin requests ----------------------------------------------------

    def _on_broker_change(self) -> None:
        if not self._active:
            return
        ctx = self.context
        current = self.zk.get_all_brokers_and_epochs()
        known = dict(ctx.broker_epochs)
        new = sorted(b for b in current if b not in known)
        dead = sorted(b for b in known if b not in current)
        bounced = sorted(b for b in current if b in known and current[b][1] != known[b])
        if new or dead or bounced:
            log.info("Controller epoch %d: brokers new %s, dead %s, bounced %s", ctx.epoch, new,
                     dead, bounced)
        for broker_id in dead:
            ctx.remove_broker(broker_id)
            self._after(self.channel.remove_broker, broker_id)
        for broker_id in new:
            ctx.add_broker(*current[broker_id])
            self._after(self.channel.add_broker, current[broker_id][0])
        if new:
            self._on_broker_startup(new)
        if bounced:
            for broker_id in bounced:
                ctx.remove_broker(broker_id)
                self._after(self.channel.remove_broker, broker_id)
            self._on_broker_failure(bounced)
            for broker_id in bounced:
                ctx.add_broker(*current[broker_id])
                self._after(self.channel.add_broker, current[broker_id][0])
            self._on_broker_startup(bounced)
        if dead:
            self._on_broker_failure(dead)

    def _on_broker_startup(self, brokers: list[int]) -> None:
        ctx = self.context
        batch = self._new_batch()
        batch.add_update_metadata(ctx.live_brokers, ctx.all_partitions())
        for tp in ctx.all_partitions():
            hosted = [b for b in brokers if b in ctx.replicas(tp)]
            if hosted and tp.topic not in ctx.topics_to_delete:
                batch.add_leader_and_isr(hosted, tp)
        created = self._psm.initialize(
            tp for tp in ctx.all_partitions() if tp.topic not in ctx.topics_to_delete)
        for tp in created:
            batch.add_leader_and_isr(ctx.replicas(tp), tp, is_new=True)
        for tp in self._psm.elect_offline(ctx.offline_partitions()):
            batch.add_leader_and_isr(ctx.replicas(tp), tp)
        self._send(batch)
        self._reassignment.check(list(ctx.reassignments))
        self._deletion.resume()

    def _on_broker_failure(self, dead: list[int]) -> None:
        ctx = self.context
        batch = self._new_batch()
        led = [tp for tp, s in sorted(ctx.partition_states.items())
               if s.leader in dead and tp.topic not in ctx.topics_to_delete]
        for tp in self._psm.elect_offline(led):
            batch.add_leader_and_isr(ctx.replicas(tp), tp)
        for broker_id in dead:
            hosted = [tp for tp in ctx.partitions_on_broker(broker_id)
                      if tp.topic not in ctx.topics_to_delete]
            for tp in self._psm.remove_replica_from_isr(broker_id, hosted):
                batch.add_leader_and_isr([r for r in ctx.replicas(tp) if r != broker_id], tp)
        batch.add_update_metadata(ctx.live_brokers)
        self._send(batch)
        self._deletion.on_broker_failure(dead)

    def _on_topic_change(self) -> None:
        if not self._active:
            return
        ctx = self.context
        topics = set(self.zk.get_all_topics())
        for topic in sorted(ctx.all_topics - topics):
            ctx.remove_topic(topic)
            self._watched_topics.discard(topic)
        new_partitions = []
        for topic in sorted(topics - ctx.all_topics):
            self._load_topic(topic)
            new_partitions += ctx.partitions_of(topic)
        self._on_new_partitions(new_partitions)

    def _on_partition_modifications(self, topic: str) -> None:
        ctx = self.context
        if not self._active or topic in ctx.topics_to_delete or topic not in ctx.all_topics:
            return
        found = self.zk.get_topic_assignment(topic)
        if found is None:
            return
        added = {p: a for p, a in found[0].partitions.items()
                 if TopicPartition(topic, p) not in ctx.assignments}
        if added:
            ctx.set_topic(topic, found[0].topic_id, added)
            self._on_new_partitions([TopicPartition(topic, p) for p in sorted(added)])

    def _on_new_partitions(self, partitions: list[TopicPartition]) -> None:
        ctx = self.context
        batch = self._new_batch()
        for tp in self._psm.initialize(partitions):
            batch.add_leader_and_isr(ctx.replicas(tp), tp, is_new=True)
        self._send(batch)

    def _on_isr_change(self) -> None:
        if not self._active:
            return
        ctx = self.context
        sequence_numbers = self.zk.get_isr_change_notifications()
        changed: set[TopicPartition] = set()
        for sequence_number in sequence_numbers:
            changed |= self.zk.get_isr_change_notification(sequence_number)
        self.zk.delete_isr_change_notifications(sequence_numbers)
        changed = {tp for tp in changed if tp in ctx.assignments}
        for tp in sorted(changed):
            fresh = self.zk.get_partition_state(tp)
            if fresh is not None:
                ctx.put_state(tp, *fresh)
        if changed:
            batch = self._new_batch()
            batch.add_update_metadata(ctx.live_brokers, changed)
            self._send(batch)
            self._reassignment.check(sorted(changed))

    def _on_config_change(self) -> None:
        """A topic's config changed: an offline partition may now allow an unclean election."""
        if not self._active:
            return
        changes = self.zk.get_config_change_notifications()
        fresh = [c for c in changes if c[0] > self._last_config_change]
        if changes:
            self._last_config_change = max(self._last_config_change, changes[-1][0])
        topics = {name for _, kind, name in fresh if kind == ConfigEntityZNode.TOPICS}
        offline = [tp for tp in self.context.offline_partitions() if tp.topic in topics]
        self._elect_offline_and_send(offline)

    def _elect_offline_and_send(self, partitions: list[TopicPartition], *,
                                allow_unclean: bool = False) -> list[TopicPartition]:
        ctx = self.context
        elected = self._psm.elect_offline(partitions, allow_unclean=allow_unclean)
        batch = self._new_batch()
        for tp in elected:
            batch.add_leader_and_isr(ctx.replicas(tp), tp)
        self._send(batch)
        return elected

    def _on_topic_deletion(self) -> None:
        if self._active:
            self._deletion.enqueue(self.zk.get_delete_topic_requests())

    def _on_reassignment(self) -> None:
        if self._active:
            self._reassignment.on_request_changed()

    def _on_preferred_replica_election_request(self) -> None:
        if not self._active:
            return
        requested = self.zk.get_preferred_replica_election()
        if requested is None:
            return
        ctx = self.context
        self._elect_preferred_and_send(
            [tp for tp in sorted(requested)
             if tp in ctx.assignments and tp.topic not in ctx.topics_to_delete])
        self.zk.delete_preferred_replica_election(
            controller_epoch_zk_version=ctx.epoch_zk_version)

    def _elect_preferred_and_send(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        ctx = self.context
        elected = self._psm.elect_preferred(partitions)
        batch = self._new_batch()
        for tp in elected:
            batch.add_leader_and_isr(ctx.replicas(tp), tp)
        self._send(batch)
        return elected

    # --- auto leader rebalance -------------------------------------------------------------------

    def _check_leader_imbalance(self) -> None:
        if self._active:
            rebalance_leaders(self._psm, self._new_batch(), self._send,
                              self.config["leader.imbalance.per.broker.percentage"])

    # --- requests from brokers -------------------------------------------------------------------

    def _controlled_shutdown(self, broker_id: int, broker_epoch: int
                             ) -> tuple[ErrorCode, list[tuple[str, int]]]:
        if not self._active:
            return ErrorCode.not_controller, []
        return controlled_shutdown(self._psm, self._new_batch(), self._send, broker_id,
                                   broker_epoch)

    def _elect_leaders(self, election_type: int, partitions: list[tuple[str, int]] | None
                       ) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
        if not self._active:
            return {(tp[0], tp[1]): (ErrorCode.not_controller, None) for tp in partitions or []}
        return elect_leaders(self._psm, self._new_batch(), self._send, election_type,
                             partitions)
