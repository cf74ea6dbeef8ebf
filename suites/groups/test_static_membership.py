"""Static membership (KIP-345): a restarted member keeps its place without a rebalance."""

from __future__ import annotations

import pytest

from harness.cluster.targets import Target
from harness.wire.errors import ErrorCode

from ..support import unique_name
from ._helpers import (
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    SYNC_GROUP,
    RawFactory,
    coordinator_client,
    err,
    heartbeat,
    join,
    leave,
    stable_member,
    sync,
)


def test_a_static_member_rejoins_without_a_rebalance_and_its_old_id_is_fenced(
        kafka_target: Target, kafka_raw_client: RawFactory, request: pytest.FixtureRequest) -> None:
    """A JoinGroup with a known group.instance.id and an empty member id replaces the old
    member without a rebalance — same generation, same assignment — and the old member id is
    fenced with FENCED_INSTANCE_ID [KIP-345].

    LeaveGroup naming the old member id is fenced too; by instance id alone it removes the
    member."""
    group = unique_name(request, "g-")
    client = coordinator_client(kafka_raw_client, group, JOIN_GROUP, SYNC_GROUP, HEARTBEAT,
                                LEAVE_GROUP)
    first = stable_member(client, group, assignment=b"mine", instance="instance-1")

    restarted = join(client, group, instance="instance-1")
    assert err(restarted) == ErrorCode.none
    assert restarted.member_id != first.member_id
    assert restarted.generation_id == first.generation_id
    synced = sync(client, group, restarted, instance="instance-1")
    assert (err(synced), synced.assignment) == (ErrorCode.none, b"mine")
    assert heartbeat(client, group, restarted.member_id, restarted.generation_id,
                     "instance-1") == ErrorCode.none

    assert heartbeat(client, group, first.member_id, first.generation_id, "instance-1") \
        == ErrorCode.fenced_instance_id
    stale = leave(client, group, (first.member_id, "instance-1"))
    assert [err(m) for m in stale.members] == [ErrorCode.fenced_instance_id]

    left = leave(client, group, ("", "instance-1"))
    assert err(left) == ErrorCode.none and [err(m) for m in left.members] == [ErrorCode.none]
    assert heartbeat(client, group, restarted.member_id, restarted.generation_id,
                     "instance-1") == ErrorCode.unknown_member_id
