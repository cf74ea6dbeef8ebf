"""Partition leader election and replica assignment as pure functions, the controller's rules.

The controller (one event loop) decides *what* to write; these functions decide *who leads*,
from nothing but the assignment, the ISR and who is alive. Keeping them free of I/O is what lets
the unclean-election guarantees be stated as properties and checked with hypothesis.

Every election walks the replicas in assignment order, so the preferred replica (the first one)
wins whenever it is eligible, and the outcome is the same on every controller.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

NO_LEADER = -1


@dataclass(frozen=True)
class LeaderElection:
    """The outcome for one partition.

    ``leader`` is :data:`NO_LEADER` when nobody is eligible; ``isr`` is then the ISR as it was,
    so the partition stays offline until one of those replicas comes back. ``unclean`` marks a
    leader chosen from outside the ISR: records the ISR had acknowledged may be lost.
    """

    leader: int
    isr: tuple[int, ...]
    unclean: bool = False

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER


def _first(candidates: Sequence[int], eligible: Collection[int]) -> int:
    return next((replica for replica in candidates if replica in eligible), NO_LEADER)


def offline_partition_leader_election(
    assignment: Sequence[int],
    isr: Sequence[int],
    live_replicas: Collection[int],
    unclean_leader_election_enabled: bool,
) -> LeaderElection:
    """A new leader for a partition whose leader died (or that never had one).

    Clean: the first live replica in assignment order that is in the ISR; the new ISR is the
    live part of the old one. Unclean, only when enabled and no ISR member is alive: the first
    live replica, which becomes the whole ISR. Otherwise nobody leads.
    """
    live_isr = [replica for replica in isr if replica in live_replicas]
    leader = _first(assignment, live_isr)
    if leader != NO_LEADER:
        return LeaderElection(leader, tuple(live_isr))
    if unclean_leader_election_enabled:
        leader = _first(assignment, live_replicas)
        if leader != NO_LEADER:
            return LeaderElection(leader, (leader,), unclean=True)
    return LeaderElection(NO_LEADER, tuple(isr))


def reassign_partition_leader_election(
    reassignment: Sequence[int], isr: Sequence[int], live_replicas: Collection[int]
) -> LeaderElection:
    """During a reassignment: the first live ISR member in the *target* replica order."""
    leader = _first(reassignment, [r for r in isr if r in live_replicas])
    return LeaderElection(leader, tuple(isr))


def preferred_replica_partition_leader_election(
    assignment: Sequence[int], isr: Sequence[int], live_replicas: Collection[int]
) -> LeaderElection:
    """The preferred (first) replica, only if it is alive and in the ISR; the ISR is unchanged."""
    preferred = assignment[0] if assignment else NO_LEADER
    eligible = preferred in live_replicas and preferred in isr
    return LeaderElection(preferred if eligible else NO_LEADER, tuple(isr))


def controlled_shutdown_partition_leader_election(
    assignment: Sequence[int],
    isr: Sequence[int],
    live_replicas: Collection[int],
    shutting_down_brokers: Collection[int],
) -> LeaderElection:
    """Move leadership off brokers that are shutting down: the first live ISR member that is
    not shutting down; the new ISR drops the shutting-down brokers."""
    remaining_isr = tuple(replica for replica in isr if replica not in shutting_down_brokers)
    leader = _first(assignment, [r for r in remaining_isr if r in live_replicas])
    return LeaderElection(leader, remaining_isr if leader != NO_LEADER else tuple(isr))


def remove_replica_from_isr(
    leader: int, isr: Sequence[int], replica: int
) -> tuple[int, tuple[int, ...]]:
    """A replica went offline: drop it from the ISR, and from leadership if it led.

    The last ISR member is kept even when it is the one going away: it holds every acknowledged
    record, so it must stay the one replica a clean election will wait for.
    """
    new_leader = NO_LEADER if leader == replica else leader
    if len(isr) == 1 and isr[0] == replica:
        return new_leader, tuple(isr)
    return new_leader, tuple(r for r in isr if r != replica)


def assign_replicas_to_brokers(
    brokers: Collection[int], partitions: int, replication_factor: int, start_index: int = 0
) -> dict[int, list[int]]:
    """Partition ``i``'s ``j``-th replica on broker ``(start_index + i + j) mod n``.

    Brokers are taken in id order, so every controller computes the same assignment; the first
    replicas (the preferred leaders) are spread round the brokers one partition at a time.
    """
    if partitions < 1:
        raise ValueError(f"the number of partitions must be at least 1, got {partitions}")
    if replication_factor < 1:
        raise ValueError(f"replication factor must be at least 1, got {replication_factor}")
    ordered = sorted(set(brokers))
    if replication_factor > len(ordered):
        raise ValueError(
            f"replication factor {replication_factor} is larger than the number of available "
            f"brokers ({len(ordered)}: {ordered})"
        )
    n = len(ordered)
    return {
        p: [ordered[(start_index + p + j) % n] for j in range(replication_factor)]
        for p in range(partitions)
    }
