"""DescribeGroups through a group's whole lifecycle, as Kafka's group state machine names it."""

from __future__ import annotations

import pytest

from harness.cluster.targets import Target
from harness.raw_client import RawClient
from harness.waiting import wait_for
from harness.wire.errors import ErrorCode

from ..support import unique_name
from ._helpers import (
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    SYNC_GROUP,
    WAIT_S,
    BackgroundJoin,
    RawFactory,
    V,
    coordinator_client,
    describe,
    err,
    join,
    leave,
    rejoin_when_rebalancing,
    sync,
)


def test_describe_groups_reports_every_state_of_the_lifecycle(
        kafka_target: Target, kafka_raw_client: RawFactory, request: pytest.FixtureRequest) -> None:
    """DescribeGroups reports Dead for a group never seen, CompletingRebalance (joined, awaiting
    the leader's SyncGroup), Stable, PreparingRebalance (a member joins, others not yet
    rejoined), Empty once every member left, and Dead after DeleteGroups [Kafka GroupMetadata
    states; protocol guide, DescribeGroups v0-v5 answer Dead, no error, for unknown groups].

    Each state is awaited, not asked for once: Kafka 4's group coordinator (KIP-848's runtime)
    answers DescribeGroups from its last committed state, which follows an acknowledged
    JoinGroup or SyncGroup once the offsets partition's followers have it — measured on 4.4 with
    three KRaft nodes, a DescribeGroups right after the first JoinGroup answered Dead in one run
    of three. Kafka 3.9 answers the new state at once."""
    group = unique_name(request, "g-")
    first = coordinator_client(kafka_raw_client, group, JOIN_GROUP, SYNC_GROUP, HEARTBEAT,
                               LEAVE_GROUP, DESCRIBE_GROUPS, DELETE_GROUPS)
    second = coordinator_client(kafka_raw_client, group)
    assert _state(first, group) == "Dead"

    joined = join(first, group)
    assert err(joined) == ErrorCode.none
    first_id = joined.member_id
    _await_state(first, group, "CompletingRebalance")
    sync(first, group, joined, {first_id: b"A"})
    _await_state(first, group, "Stable")
    stable = describe(first, group)
    assert (err(stable), stable.group_state, stable.protocol_type, stable.protocol_data) \
        == (ErrorCode.none, "Stable", "consumer", "range")
    assert [(m.member_id, m.member_assignment) for m in stable.members] == [(first_id, b"A")]

    joining = BackgroundJoin(second, group)
    wait_for(lambda: _state(first, group) == "PreparingRebalance", WAIT_S,
             "the group to prepare a rebalance", retry_on=())
    rejoined = rejoin_when_rebalancing(first, group, joined, joining)
    follower = joining.answer()
    second_id = follower.member_id
    _await_state(first, group, "CompletingRebalance")
    sync(first, group, rejoined, {first_id: b"1", second_id: b"2"})
    sync(second, group, follower)
    _await_state(first, group, "Stable")
    assert sorted(m.member_id for m in describe(first, group).members) \
        == sorted([first_id, second_id])

    assert err(leave(first, group, (first_id, None), (second_id, None))) == ErrorCode.none
    _await_state(first, group, "Empty")
    deleted = first.request(DELETE_GROUPS, V[DELETE_GROUPS], {"groups_names": [group]})
    assert [(r.group_id, err(r)) for r in deleted.results] == [(group, ErrorCode.none)]
    _await_state(first, group, "Dead")


def _await_state(client: RawClient, group: str, state: str) -> None:
    """Until DescribeGroups reports ``state`` (see the test's doc: Kafka 4 reports a change
    once it is committed)."""
    wait_for(lambda: _state(client, group) == state, WAIT_S, f"{group} to be described {state}",
             retry_on=())


def _state(client: RawClient, group: str) -> str:
    described = describe(client, group)
    assert err(described) == ErrorCode.none, err(described)
    return str(described.group_state)
