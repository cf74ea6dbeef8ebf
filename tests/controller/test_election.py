"""Leader election and replica assignment: the seeds' rules, examples first, then properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reference_broker.controller.election import (
    NO_LEADER,
    LeaderElection,
    assign_replicas_to_brokers,
    controlled_shutdown_partition_leader_election,
    offline_partition_leader_election,
    preferred_replica_partition_leader_election,
    reassign_partition_leader_election,
    remove_replica_from_isr,
)
from reference_broker.server.admin_manager import assign_replicas


def test_offline_election_takes_the_first_live_isr_member_in_assignment_order() -> None:
    result = offline_partition_leader_election([1, 2, 3], isr=[3, 2], live_replicas={2, 3},
                                               unclean_leader_election_enabled=False)
    assert result == LeaderElection(2, (3, 2))


def test_offline_election_drops_dead_replicas_from_the_isr() -> None:
    result = offline_partition_leader_election([1, 2, 3], [1, 2, 3], {2, 3}, False)
    assert result == LeaderElection(2, (2, 3))


def test_no_live_isr_member_and_unclean_disabled_leaves_the_partition_offline() -> None:
    result = offline_partition_leader_election([1, 2, 3], isr=[1], live_replicas={2, 3},
                                               unclean_leader_election_enabled=False)
    assert result == LeaderElection(NO_LEADER, (1,))
    assert not result.has_leader


def test_unclean_election_takes_the_first_live_replica_as_the_whole_isr() -> None:
    result = offline_partition_leader_election([1, 3, 2], isr=[1], live_replicas={2, 3},
                                               unclean_leader_election_enabled=True)
    assert result == LeaderElection(3, (3,), unclean=True)


def test_unclean_enabled_still_prefers_a_live_isr_member() -> None:
    result = offline_partition_leader_election([1, 2, 3], [3], {2, 3}, True)
    assert result == LeaderElection(3, (3,), unclean=False)


def test_nobody_alive_means_no_leader_even_when_unclean_is_allowed() -> None:
    result = offline_partition_leader_election([1, 2], [1, 2], set(), True)
    assert result == LeaderElection(NO_LEADER, (1, 2))


def test_preferred_replica_election() -> None:
    assert preferred_replica_partition_leader_election([2, 1], [1, 2], {1, 2}).leader == 2
    assert preferred_replica_partition_leader_election([2, 1], [1], {1, 2}).leader == NO_LEADER
    assert preferred_replica_partition_leader_election([2, 1], [1, 2], {1}).leader == NO_LEADER
    assert preferred_replica_partition_leader_election([], [1], {1}).leader == NO_LEADER


def test_reassignment_election_follows_the_target_order() -> None:
    assert reassign_partition_leader_election([4, 3, 2], [2, 3, 4], {2, 3, 4}).leader == 4
    assert reassign_partition_leader_election([4, 3, 2], [2, 3], {2, 3, 4}).leader == 3
    assert reassign_partition_leader_election([4], [2], {2, 4}).leader == NO_LEADER


def test_controlled_shutdown_moves_leadership_and_shrinks_the_isr() -> None:
    result = controlled_shutdown_partition_leader_election(
        [1, 2, 3], isr=[1, 2, 3], live_replicas={1, 2, 3}, shutting_down_brokers={1}
    )
    assert result == LeaderElection(2, (2, 3))


def test_controlled_shutdown_of_the_only_isr_member_finds_no_leader() -> None:
    result = controlled_shutdown_partition_leader_election([1, 2], [1], {1, 2}, {1})
    assert result == LeaderElection(NO_LEADER, (1,))


def test_removing_a_replica_from_the_isr() -> None:
    assert remove_replica_from_isr(1, (1, 2, 3), 1) == (NO_LEADER, (2, 3))
    assert remove_replica_from_isr(1, (1, 2, 3), 3) == (1, (1, 2))
    assert remove_replica_from_isr(1, (1,), 1) == (NO_LEADER, (1,))
    assert remove_replica_from_isr(2, (2, 3), 4) == (2, (2, 3))


def test_assignment_shape() -> None:
    assert assign_replicas_to_brokers([3, 1, 2], partitions=4, replication_factor=3) == {
        0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2], 3: [1, 2, 3],
    }
    assert assign_replicas_to_brokers([1, 2, 3], 2, 2, start_index=2) == {0: [3, 1], 1: [1, 2]}


@pytest.mark.parametrize("brokers, partitions, rf, message", [
    ([1, 2], 1, 3, "larger than the number of available brokers"),
    ([1, 2], 0, 1, "partitions must be at least 1"),
    ([1, 2], 1, 0, "replication factor must be at least 1"),
])
def test_assignment_rejects_impossible_requests(brokers, partitions, rf, message) -> None:
    with pytest.raises(ValueError, match=message):
        assign_replicas_to_brokers(brokers, partitions, rf)


# --- properties ------------------------------------------------------------------------------

_brokers = st.lists(st.integers(min_value=0, max_value=9), min_size=1, max_size=6, unique=True)


@st.composite
def partitions(draw):
    """An assignment, an ISR drawn from it, a set of live brokers, and the unclean flag."""
    assignment = draw(_brokers)
    isr = draw(st.lists(st.sampled_from(assignment), unique=True))
    live = draw(st.sets(st.integers(min_value=0, max_value=9)))
    return assignment, isr, live, draw(st.booleans())


@given(partitions())
def test_the_leader_is_always_a_live_replica(case) -> None:
    assignment, isr, live, unclean = case
    result = offline_partition_leader_election(assignment, isr, live, unclean)
    if result.has_leader:
        assert result.leader in live and result.leader in assignment
        assert result.leader in result.isr


@given(partitions())
def test_a_clean_leader_was_in_the_isr(case) -> None:
    assignment, isr, live, unclean = case
    result = offline_partition_leader_election(assignment, isr, live, unclean)
    if result.has_leader and not result.unclean:
        assert result.leader in isr
        assert set(result.isr) <= set(isr) & live


@given(partitions())
def test_unclean_only_when_allowed_and_no_isr_member_lives(case) -> None:
    assignment, isr, live, unclean = case
    result = offline_partition_leader_election(assignment, isr, live, unclean)
    if result.unclean:
        assert unclean
        assert not set(isr) & live
        assert result.isr == (result.leader,)
    no_candidate = not set(isr) & live and (not unclean or not set(assignment) & live)
    assert result.has_leader == (not no_candidate)


@given(partitions())
def test_no_leader_keeps_the_isr_for_the_replicas_that_may_come_back(case) -> None:
    assignment, isr, live, unclean = case
    result = offline_partition_leader_election(assignment, isr, live, unclean)
    if not result.has_leader:
        assert result.isr == tuple(isr)


@given(partitions(), st.sets(st.integers(min_value=0, max_value=9)))
def test_controlled_shutdown_never_picks_a_broker_going_down(case, shutting_down) -> None:
    assignment, isr, live, _ = case
    result = controlled_shutdown_partition_leader_election(assignment, isr, live, shutting_down)
    if result.has_leader:
        assert result.leader not in shutting_down and result.leader in live
        assert result.leader in isr and not set(result.isr) & shutting_down


@given(
    brokers=_brokers,
    partition_count=st.integers(min_value=1, max_value=20),
    data=st.data(),
    start=st.integers(min_value=0, max_value=50),
)
def test_assignment_is_round_robin_and_matches_the_admin_manager(
    brokers, partition_count, data, start
) -> None:
    rf = data.draw(st.integers(min_value=1, max_value=len(brokers)))
    result = assign_replicas_to_brokers(brokers, partition_count, rf, start)
    ordered = sorted(brokers)
    n = len(ordered)
    for p, replicas in result.items():
        assert len(set(replicas)) == rf
        assert replicas == [ordered[(start + p + j) % n] for j in range(rf)]
    assert result == assign_replicas(list(brokers), partition_count, rf, start)
