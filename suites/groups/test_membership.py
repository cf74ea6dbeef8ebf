"""Group membership over time: rebalances signalled through heartbeats, LeaveGroup, expiry."""

from __future__ import annotations

import time

import pytest

from harness.cluster.targets import Target
from harness.waiting import wait_for
from harness.wire.errors import ErrorCode

from ..support import unique_name
from ._helpers import (
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    SYNC_GROUP,
    WAIT_S,
    BackgroundJoin,
    RawFactory,
    coordinator_client,
    err,
    heartbeat,
    leave,
    rejoin_when_rebalancing,
    stable_member,
    sync,
)

GROUP_APIS = (JOIN_GROUP, SYNC_GROUP, HEARTBEAT, LEAVE_GROUP)
MIN_SESSION_MS = 6000  # Kafka's default group.min.session.timeout.ms


def test_a_joining_member_makes_heartbeats_answer_rebalance_in_progress(
        kafka_target: Target, kafka_raw_client: RawFactory, request: pytest.FixtureRequest) -> None:
    """When a new member joins a Stable group, the members' heartbeats answer
    REBALANCE_IN_PROGRESS until they rejoin — but one at a wrong generation ILLEGAL_GENERATION,
    the generation being checked before the state; the rebalance completes with generation + 1
    and the followers get their share from the leader's SyncGroup [protocol guide, Heartbeat
    and JoinGroup; Kafka's consumer rebalance protocol, GroupCoordinator handleHeartbeat]."""
    group = unique_name(request, "g-")
    first = coordinator_client(kafka_raw_client, group, *GROUP_APIS)
    second = coordinator_client(kafka_raw_client, group, *GROUP_APIS)
    leader = stable_member(first, group)
    assert heartbeat(first, group, leader.member_id, leader.generation_id) == ErrorCode.none

    joining = BackgroundJoin(second, group)
    wait_for(lambda: heartbeat(first, group, leader.member_id, leader.generation_id)
             == ErrorCode.rebalance_in_progress, WAIT_S, "the rebalance to begin", retry_on=())
    assert heartbeat(first, group, leader.member_id, leader.generation_id + 1) \
        == ErrorCode.illegal_generation
    rejoined = rejoin_when_rebalancing(first, group, leader, joining)
    follower = joining.answer()
    second_id = follower.member_id
    assert err(rejoined) == err(follower) == ErrorCode.none
    assert rejoined.generation_id == follower.generation_id == leader.generation_id + 1

    shares = {leader.member_id: b"share-1", second_id: b"share-2"}
    assert err(sync(first, group, rejoined, shares)) == ErrorCode.none
    synced = sync(second, group, follower)
    assert (err(synced), synced.assignment) == (ErrorCode.none, b"share-2")
    assert heartbeat(second, group, second_id, follower.generation_id) == ErrorCode.none


def test_leave_group_rebalances_the_others_and_increments_the_generation(
        kafka_target: Target, kafka_raw_client: RawFactory, request: pytest.FixtureRequest) -> None:
    """LeaveGroup removes the member at once (no session timeout wait): the remaining members
    are told REBALANCE_IN_PROGRESS and rejoin into generation + 1 without it; the departed
    member id is then unknown [protocol guide, LeaveGroup; KIP-345 batched LeaveGroup v3]."""
    group = unique_name(request, "g-")
    first = coordinator_client(kafka_raw_client, group, *GROUP_APIS)
    second = coordinator_client(kafka_raw_client, group, *GROUP_APIS)
    leader = stable_member(first, group)
    joining = BackgroundJoin(second, group)
    rejoined = rejoin_when_rebalancing(first, group, leader, joining)
    follower = joining.answer()
    second_id = follower.member_id
    assert sync(first, group, rejoined, {leader.member_id: b"1", second_id: b"2"}).assignment \
        == b"1"

    left = leave(second, group, (second_id, None))
    assert err(left) == ErrorCode.none
    assert [(m.member_id, err(m)) for m in left.members] == [(second_id, ErrorCode.none)]
    alone = rejoin_when_rebalancing(first, group, rejoined)
    assert err(alone) == ErrorCode.none and alone.generation_id == rejoined.generation_id + 1
    assert [m.member_id for m in alone.members] == [leader.member_id]
    assert heartbeat(second, group, second_id, alone.generation_id) == ErrorCode.unknown_member_id
    unknown = leave(second, group, (second_id, None))
    assert [err(m) for m in unknown.members] == [ErrorCode.unknown_member_id]


def test_a_silent_member_is_evicted_after_its_session_timeout(
        kafka_target: Target, kafka_raw_client: RawFactory, request: pytest.FixtureRequest) -> None:
    """A member that sends no heartbeat for session.timeout.ms is removed from the group: the
    others rebalance without it (not before the timeout) and its member id becomes unknown
    [protocol guide, JoinGroup session_timeout_ms; Kafka GroupCoordinator member expiry].

    The silent member uses the smallest session timeout Kafka allows by default (6 s) and
    says nothing after its JoinGroup answer; rebalance timeouts are longer, so only the
    session timeout can remove it."""
    group = unique_name(request, "g-")
    silent = coordinator_client(kafka_raw_client, group, *GROUP_APIS)
    alive = coordinator_client(kafka_raw_client, group, *GROUP_APIS)
    slow_ms = 30_000
    leader = stable_member(alive, group, rebalance_ms=slow_ms)
    joining = BackgroundJoin(silent, group, session_ms=MIN_SESSION_MS, rebalance_ms=slow_ms)
    rejoined = rejoin_when_rebalancing(alive, group, leader, joining, rebalance_ms=slow_ms)
    joined = joining.answer()
    went_silent = time.monotonic()
    silent_id = joined.member_id
    assert err(sync(alive, group, rejoined, {leader.member_id: b"1", silent_id: b"2"})) \
        == ErrorCode.none

    def rebalancing() -> bool:
        answer = heartbeat(alive, group, leader.member_id, rejoined.generation_id)
        assert answer in (ErrorCode.none, ErrorCode.rebalance_in_progress), answer
        return answer == ErrorCode.rebalance_in_progress

    wait_for(rebalancing, 25, "the silent member's session to expire", interval=0.5, retry_on=())
    assert time.monotonic() - went_silent >= MIN_SESSION_MS / 1000 * 0.9
    alone = rejoin_when_rebalancing(alive, group, rejoined, rebalance_ms=slow_ms)
    assert err(alone) == ErrorCode.none and alone.generation_id == rejoined.generation_id + 1
    assert [m.member_id for m in alone.members] == [leader.member_id]
    assert heartbeat(silent, group, silent_id, joined.generation_id) == ErrorCode.unknown_member_id
