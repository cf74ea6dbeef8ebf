"""What the controller does for ControlledShutdown and ElectLeaders requests, and for the
periodic leader rebalance — the decisions that brokers or a timer ask for, rather than
ZooKeeper watches.

Each function runs inside one controller event (on the controller's ZooKeeper thread) with the
partition state machine of the current epoch, collects the resulting requests in ``batch`` and
hands it to ``send``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from harness.wire.errors import ErrorCode
from reference_broker.controller.partition_state_machine import PartitionStateMachine
from reference_broker.controller.request_batch import ControllerBrokerRequestBatch
from reference_broker.controller.state_changes import imbalanced_partitions
from reference_broker.log.topic_partition import TopicPartition

log = logging.getLogger("reference_broker.controller")

PREFERRED = 0
UNCLEAN = 1
_NOT_NEEDED = (ErrorCode.election_not_needed, "Leader election not needed for topic partition.")

Send = Callable[[ControllerBrokerRequestBatch], None]


def controlled_shutdown(psm: PartitionStateMachine, batch: ControllerBrokerRequestBatch,
                        send: Send, broker_id: int, broker_epoch: int
                        ) -> tuple[ErrorCode, list[tuple[str, int]]]:
    """Move leadership off ``broker_id`` and take it out of the ISRs it is a follower in.

    Returns the error and the partitions (with more than one replica) it still leads —
    the broker retries until that list is empty or it runs out of attempts.
    """
    ctx = psm.context
    if broker_id not in ctx.live_brokers:
        return ErrorCode.broker_not_available, []
    if broker_epoch != -1 and broker_epoch < ctx.broker_epochs[broker_id]:
        return ErrorCode.stale_broker_epoch, []
    ctx.shutting_down_brokers.add(broker_id)
    log.info("Controller epoch %d: controlled shutdown of broker %d", ctx.epoch, broker_id)
    hosted = [tp for tp in ctx.partitions_on_broker(broker_id)
              if len(ctx.replicas(tp)) > 1 and tp.topic not in ctx.topics_to_delete
              and tp in ctx.partition_states]
    led = [tp for tp in hosted if ctx.partition_states[tp].leader == broker_id]
    followed = [tp for tp in hosted if tp not in led]

    def others(tp: TopicPartition) -> list[int]:
        return [r for r in ctx.replicas(tp) if r != broker_id]

    for tp in psm.elect_controlled_shutdown(led):
        batch.add_leader_and_isr(others(tp), tp)
    for tp in followed:
        batch.add_stop_replica([broker_id], tp, delete_partition=False,
                               leader_epoch=ctx.partition_states[tp].leader_epoch)
    for tp in psm.remove_replica_from_isr(broker_id, followed):
        batch.add_leader_and_isr(others(tp), tp)
    send(batch)
    remaining = [tp for tp in ctx.partitions_led_by(broker_id) if len(ctx.replicas(tp)) > 1]
    return ErrorCode.none, [(tp.topic, tp.partition) for tp in remaining]


def elect_leaders(psm: PartitionStateMachine, batch: ControllerBrokerRequestBatch, send: Send,
                  election_type: int, partitions: list[tuple[str, int]] | None
                  ) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
    """ElectLeaders (KIP-460): preferred (0) moves leadership to the first replica when it is
    in sync; unclean (1) elects for partitions without a live leader, out-of-sync replicas
    allowed. ``partitions`` None means every partition."""
    ctx = psm.context
    if partitions is None:
        requested = [tp for tp in ctx.all_partitions() if tp.topic not in ctx.topics_to_delete]
    else:
        requested = [TopicPartition(topic, partition) for topic, partition in partitions]
    results: dict[TopicPartition, tuple[ErrorCode, str | None]] = {}
    candidates = []
    for tp in requested:
        state = ctx.partition_states.get(tp)
        if tp not in ctx.assignments or tp.topic in ctx.topics_to_delete or state is None:
            results[tp] = (ErrorCode.unknown_topic_or_partition, "The partition does not exist.")
        elif election_type not in (PREFERRED, UNCLEAN):
            results[tp] = (ErrorCode.invalid_request, f"unknown election type {election_type}")
        elif _already_elected(election_type, state.leader, ctx.replicas(tp),
                              ctx.is_replica_online(state.leader)):
            results[tp] = _NOT_NEEDED
        else:
            candidates.append(tp)
    if election_type == PREFERRED:
        elected = set(psm.elect_preferred(candidates))
        error = ErrorCode.preferred_leader_not_available
        strategy = "PreferredReplicaPartitionLeader"
    else:
        elected = set(psm.elect_offline(candidates, allow_unclean=True))
        error, strategy = ErrorCode.eligible_leaders_not_available, "UncleanLeader"
    for tp in candidates:
        if tp in elected:
            batch.add_leader_and_isr(ctx.replicas(tp), tp)
            results[tp] = (ErrorCode.none, None)
        else:
            results[tp] = (error, f"Failed to elect leader for partition {tp.topic}-"
                                  f"{tp.partition} under strategy {strategy}ElectionStrategy")
    send(batch)
    return {(tp.topic, tp.partition): result for tp, result in results.items()}


def _already_elected(election_type: int, leader: int, replicas: tuple[int, ...],
                     leader_online: bool) -> bool:
    """Preferred: the first replica leads already. Unclean: the partition has a live leader."""
    if election_type == PREFERRED:
        return bool(replicas) and leader == replicas[0]
    return leader_online


def rebalance_leaders(psm: PartitionStateMachine, batch: ControllerBrokerRequestBatch,
                      send: Send, imbalance_percentage: int) -> list[TopicPartition]:
    """``auto.leader.rebalance.enable``: hand leadership back to preferred replicas of brokers
    whose imbalance exceeds ``leader.imbalance.per.broker.percentage``."""
    ctx = psm.context
    candidates = {tp: ctx.replicas(tp) for tp in ctx.all_partitions()
                  if tp.topic not in ctx.topics_to_delete and tp not in ctx.reassignments}
    leaders = {tp: state.leader for tp, state in ctx.partition_states.items()}
    imbalanced = imbalanced_partitions(candidates, leaders, ctx.live_broker_ids,
                                       imbalance_percentage)
    elected = psm.elect_preferred(imbalanced)
    for tp in elected:
        batch.add_leader_and_isr(ctx.replicas(tp), tp)
    send(batch)
    return elected
