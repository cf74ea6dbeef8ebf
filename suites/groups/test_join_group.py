"""JoinGroup: KIP-394's member id handshake, leader and protocol selection, generations."""

from __future__ import annotations

import pytest

from harness.cluster.targets import Target
from harness.wire.errors import ErrorCode
from harness.wire.group_records import encode_subscription

from ..support import unique_name
from ._helpers import (
    JOIN_GROUP,
    SUBSCRIPTION,
    BackgroundJoin,
    RawFactory,
    coordinator_client,
    err,
    join,
    join_body,
    rejoin_when_rebalancing,
    stable_member,
)

# Not a skip for a missing capability: librdkafka's mock cluster runs inside the test process
# and aborts it (assertion in rd_kafka_mock_cgrp_classic_elect_leader) when a member's first
# protocol is not the group's, which would end the whole session instead of failing one test.
MOCK_ABORTS = ("librdkafka's mock cluster aborts the test process when members prefer "
               "different protocols (rd_kafka_mock_cgrp_classic_elect_leader assertion)")


def test_join_without_member_id_gets_member_id_required(
        kafka_target: Target, kafka_raw_client: RawFactory, request: pytest.FixtureRequest) -> None:
    """JoinGroup v4+ with an empty member id answers MEMBER_ID_REQUIRED and hands out the id to
    join with; that join succeeds with it [KIP-394; protocol guide, JoinGroup].

    The new member is then the group's only member, so it leads the first generation with
    itself as the only member; the protocol chosen is the one it offered."""
    group = unique_name(request, "g-")
    client = coordinator_client(kafka_raw_client, group, JOIN_GROUP)
    first = client.request(JOIN_GROUP, 5, join_body(group))
    assert err(first) == ErrorCode.member_id_required
    assert first.member_id and first.generation_id == -1
    joined = client.request(JOIN_GROUP, 5, join_body(group, first.member_id))
    assert err(joined) == ErrorCode.none
    assert (joined.member_id, joined.leader) == (first.member_id, first.member_id)
    assert joined.generation_id >= 0 and joined.protocol_name == "range"
    assert [(m.member_id, m.metadata) for m in joined.members] == [(first.member_id, SUBSCRIPTION)]


def test_the_common_protocol_is_chosen_and_the_leader_gets_every_members_metadata(
        kafka_target: Target, kafka_raw_client: RawFactory, request: pytest.FixtureRequest) -> None:
    """The group's protocol is one every member supports (each member votes for its most
    preferred such protocol) and the leader alone gets all members' metadata; the current
    leader stays leader across a rebalance [protocol guide, JoinGroup; Kafka GroupCoordinator
    selectProtocol].

    The first member prefers a protocol the second lacks, so only the shared one can win."""
    if kafka_target.kind == "librdkafka-mock":
        pytest.skip(MOCK_ABORTS)
    group = unique_name(request, "g-")
    first_meta, second_meta = encode_subscription(["a"]), encode_subscription(["b"])
    first = coordinator_client(kafka_raw_client, group, JOIN_GROUP)
    second = coordinator_client(kafka_raw_client, group, JOIN_GROUP)
    offers = [("first-only", first_meta), ("shared", first_meta)]
    leader = stable_member(first, group, protocols=offers)
    assert leader.protocol_name == "first-only"

    second_offers = [("shared", second_meta)]
    joining = BackgroundJoin(second, group, protocols=second_offers)
    rejoined = rejoin_when_rebalancing(first, group, leader, joining, protocols=offers)
    follower = joining.answer()
    second_id = follower.member_id
    assert err(rejoined) == err(follower) == ErrorCode.none
    assert rejoined.generation_id == follower.generation_id == leader.generation_id + 1
    assert rejoined.protocol_name == follower.protocol_name == "shared"
    assert rejoined.leader == follower.leader == leader.member_id
    assert sorted((m.member_id, m.metadata) for m in rejoined.members) \
        == sorted([(leader.member_id, first_meta), (second_id, second_meta)])
    assert follower.members == ()


def test_a_member_sharing_no_protocol_gets_inconsistent_group_protocol(
        kafka_target: Target, kafka_raw_client: RawFactory, request: pytest.FixtureRequest) -> None:
    """A JoinGroup whose protocols share none with the group's members, or whose protocol type
    differs, is refused with INCONSISTENT_GROUP_PROTOCOL [protocol guide, JoinGroup errors]."""
    group = unique_name(request, "g-")
    client = coordinator_client(kafka_raw_client, group, JOIN_GROUP)
    stable_member(client, group, protocols=[("range", SUBSCRIPTION)])
    other = join(client, group, protocols=[("roundrobin", SUBSCRIPTION)])
    assert err(other) == ErrorCode.inconsistent_group_protocol
    wrong_type = join(client, group, protocol_type="connect")
    assert err(wrong_type) == ErrorCode.inconsistent_group_protocol
