"""Partition-state transitions as pure functions: old state + decision → the state to write.

:mod:`~reference_broker.controller.election` says who leads; this module turns that into the
``LeaderIsrAndControllerEpoch`` the controller writes, with Kafka's ZooKeeper-mode rule that
*every* change of leader or ISR made by the controller starts a new leader epoch — including
removing a dead follower from the ISR — so brokers can tell a newer decision from an older one.
Also here: the imbalance rule behind auto leader rebalance and the replica set of a
reassignment in flight. No I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from reference_broker.controller.election import (
    NO_LEADER,
    LeaderElection,
    remove_replica_from_isr,
)
from reference_broker.log.topic_partition import TopicPartition
from reference_broker.zk.topic_znodes import LeaderIsrAndControllerEpoch, ReplicaAssignment

UNCLEAN_LEADER_ELECTION_ENABLE = "unclean.leader.election.enable"


def initial_state(
    replicas: Sequence[int], live_brokers: Collection[int], controller_epoch: int
) -> LeaderIsrAndControllerEpoch | None:
    """A new partition: the first live replica leads, the live replicas are the ISR, epoch 0.

    None when no replica is alive: the partition is left without state until one is, because
    a state naming a dead leader would be a decision nobody can act on.
    """
    live = tuple(r for r in replicas if r in live_brokers)
    if not live:
        return None
    return LeaderIsrAndControllerEpoch(live[0], 0, live, controller_epoch)


def elected_state(
    old: LeaderIsrAndControllerEpoch, election: LeaderElection, controller_epoch: int
) -> LeaderIsrAndControllerEpoch:
    """The state after an election that found a leader: a new leader epoch."""
    return LeaderIsrAndControllerEpoch(
        election.leader, old.leader_epoch + 1, election.isr, controller_epoch,
    )


def state_without_replica(
    old: LeaderIsrAndControllerEpoch, replica: int, controller_epoch: int
) -> LeaderIsrAndControllerEpoch | None:
    """``replica`` went offline (or is shutting down): drop it from ISR and leadership.

    None when it is neither leader nor in the ISR — nothing to write.
    """
    if replica not in old.isr and old.leader != replica:
        return None
    leader, isr = remove_replica_from_isr(old.leader, old.isr, replica)
    return LeaderIsrAndControllerEpoch(leader, old.leader_epoch + 1, isr, controller_epoch,
                                       old.leader_recovery_state)


def bumped_state(
    old: LeaderIsrAndControllerEpoch, controller_epoch: int
) -> LeaderIsrAndControllerEpoch:
    """Same leader and ISR, new leader epoch: how a replica-set change reaches the brokers."""
    return LeaderIsrAndControllerEpoch(old.leader, old.leader_epoch + 1, old.isr,
                                       controller_epoch, old.leader_recovery_state)


def unclean_leader_election_enabled(topic_config: Mapping[str, str], broker_default: bool) -> bool:
    """The topic's override when it has one, else the broker's setting."""
    value = topic_config.get(UNCLEAN_LEADER_ELECTION_ENABLE)
    if value is None:
        return broker_default
    return value.strip().lower() == "true"


def imbalanced_partitions(
    replicas: Mapping[TopicPartition, Sequence[int]],
    leaders: Mapping[TopicPartition, int],
    live_brokers: Collection[int],
    imbalance_percentage: int,
) -> list[TopicPartition]:
    """Partitions to hand back to their preferred replica, as the periodic rebalance does.

    Per live preferred broker: the share of partitions preferring it that someone else leads.
    When that share exceeds ``leader.imbalance.per.broker.percentage``, every such partition of
    that broker is a candidate (the election itself still checks ISR membership).
    """
    by_preferred: dict[int, list[TopicPartition]] = {}
    for tp, assigned in replicas.items():
        if assigned:
            by_preferred.setdefault(assigned[0], []).append(tp)
    result: list[TopicPartition] = []
    for broker, partitions in sorted(by_preferred.items()):
        if broker not in live_brokers:
            continue
        not_led = [tp for tp in partitions if leaders.get(tp, NO_LEADER) != broker]
        if len(not_led) * 100 > imbalance_percentage * len(partitions):
            result.extend(sorted(not_led))
    return result


def reassignment_in_flight(
    current: Sequence[int], target: Sequence[int]
) -> ReplicaAssignment:
    """The replica set while moving from ``current`` to ``target``: target first, then the
    replicas being removed, with the adding/removing lists Kafka records alongside."""
    adding = tuple(r for r in target if r not in current)
    removing = tuple(r for r in current if r not in target)
    return ReplicaAssignment(tuple(target) + removing, adding, removing)
