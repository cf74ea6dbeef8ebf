"""Partition reassignment from ``/admin/reassign_partitions`` (Kafka's legacy, pre-KIP-455 path).

For each partition moving from replicas RS to target TRS the controller:

1. writes the union (TRS first, then the replicas leaving) with ``adding_replicas`` /
   ``removing_replicas`` to the topic's assignment and starts a new leader epoch, so the new
   replicas learn they host the partition and begin fetching from the leader;
2. waits until every target replica is in the ISR (re-checked on ISR change notifications and
   when brokers return);
3. makes TRS the replica set: elects a leader from TRS if the current one is leaving (else
   just a new leader epoch), removes the leaving replicas from the ISR, sends them StopReplica
   with ``delete_partition``, writes the final assignment, and drops the partition from the
   request znode (deleting it when nothing is left).

Targets naming dead or unknown brokers, or partitions that do not exist, are refused (logged
and dropped from the request), as Kafka does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence

from kazoo.exceptions import BadVersionError

from reference_broker.controller.controller_context import ControllerContext
from reference_broker.controller.partition_state_machine import PartitionStateMachine
from reference_broker.controller.request_batch import ControllerBrokerRequestBatch
from reference_broker.controller.state_changes import reassignment_in_flight
from reference_broker.log.topic_partition import TopicPartition
from reference_broker.zk.kafka_zk_client import KafkaZkClient
from reference_broker.zk.topic_znodes import ReplicaAssignment, TopicAssignment

log = logging.getLogger("reference_broker.controller.reassignment")


class ReassignmentManager:
    def __init__(
        self,
        zk: KafkaZkClient,
        context: ControllerContext,
        psm: PartitionStateMachine,
        *,
        new_batch: Callable[[], ControllerBrokerRequestBatch],
        send: Callable[[ControllerBrokerRequestBatch], None],
    ) -> None:
        self.zk = zk
        self.context = context
        self.psm = psm
        self._new_batch = new_batch
        self._send = send

    def on_request_changed(self) -> None:
        """Read ``/admin/reassign_partitions`` and start what it asks for."""
        request = self.zk.get_partition_reassignment()
        if request is None:
            return
        ctx = self.context
        for tp, target in sorted(request.items()):
            if tp in ctx.reassignments:
                continue
            problem = self._invalid(tp, target)
            if problem is not None:
                log.error("Controller epoch %d: refusing to reassign %s-%d to %s: %s",
                          ctx.epoch, tp.topic, tp.partition, list(target), problem)
                continue
            current = ctx.assignments[tp]
            if tuple(target) == current.replicas:
                continue
            if (current.adding_replicas or current.removing_replicas) and \
                    current.replicas[:len(target)] == tuple(target):
                ctx.reassignments[tp] = tuple(target)  # a previous controller started it
            else:
                self._start(tp, tuple(target))
        self.check(list(ctx.reassignments))
        self._write_remaining()

    def check(self, partitions: Iterable[TopicPartition]) -> None:
        """Finish the reassignments among ``partitions`` whose target replicas are all in sync."""
        ctx = self.context
        finished = False
        for tp in partitions:
            target = ctx.reassignments.get(tp)
            state = ctx.partition_states.get(tp)
            if target is None or state is None:
                continue
            if all(replica in state.isr for replica in target):
                self._finish(tp, target)
                finished = True
        if finished:
            self._write_remaining()

    def _invalid(self, tp: TopicPartition, target: Sequence[int]) -> str | None:
        ctx = self.context
        if tp not in ctx.assignments or tp.topic in ctx.topics_to_delete:
            return "the partition does not exist or is being deleted"
        if not target or len(set(target)) != len(target):
            return "the target replica list is empty or has duplicates"
        dead = [r for r in target if r not in ctx.live_broker_ids]
        if dead:
            return f"brokers {dead} are not alive"
        return None

    def _start(self, tp: TopicPartition, target: tuple[int, ...]) -> None:
        ctx = self.context
        in_flight = reassignment_in_flight(ctx.replicas(tp), target)
        self._write_assignment(tp, in_flight)
        ctx.reassignments[tp] = target
        log.info("Controller epoch %d: reassigning %s-%d from %s to %s", ctx.epoch, tp.topic,
                 tp.partition, list(in_flight.removing_replicas or ()), list(target))
        batch = self._new_batch()
        if self.psm.bump_leader_epoch([tp]):
            batch.add_leader_and_isr(in_flight.replicas, tp)
        self._send(batch)

    def _finish(self, tp: TopicPartition, target: tuple[int, ...]) -> None:
        ctx = self.context
        leaving = [r for r in ctx.replicas(tp) if r not in target]
        ctx.assignments[tp] = ReplicaAssignment(target)
        batch = self._new_batch()
        self.psm.elect_reassigned([tp])
        for replica in leaving:
            self.psm.remove_replica_from_isr(replica, [tp])
        batch.add_leader_and_isr(target, tp)
        state = ctx.partition_states.get(tp)
        batch.add_stop_replica(leaving, tp, delete_partition=True,
                               leader_epoch=state.leader_epoch if state else -1)
        self._write_assignment(tp, ReplicaAssignment(target))
        del ctx.reassignments[tp]
        self._send(batch)
        log.info("Controller epoch %d: reassignment of %s-%d to %s completed", ctx.epoch,
                 tp.topic, tp.partition, list(target))

    def _write_assignment(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        """Replace one partition's entry in the topic znode (version-checked, fenced)."""
        ctx = self.context
        while True:
            found = self.zk.get_topic_assignment(tp.topic)
            if found is None:
                return
            current, version = found
            partitions = dict(current.partitions)
            partitions[tp.partition] = assignment
            try:
                self.zk.set_topic_assignment(
                    tp.topic, TopicAssignment(partitions, current.topic_id), version,
                    controller_epoch_zk_version=ctx.epoch_zk_version)
            except BadVersionError:
                continue  # the topic znode changed since it was read: read it again
            ctx.assignments[tp] = assignment
            return

    def _write_remaining(self) -> None:
        ctx = self.context
        self.zk.set_or_delete_partition_reassignment(
            dict(ctx.reassignments), controller_epoch_zk_version=ctx.epoch_zk_version)
