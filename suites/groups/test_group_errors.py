"""Every error the classic group protocol answers: JoinGroup, SyncGroup, Heartbeat, LeaveGroup.

Each test provokes one error with raw requests and checks the exact code, so a broker that
answers a near relative (UNKNOWN_MEMBER_ID where ILLEGAL_GENERATION is due) fails by name. The
expectations were checked against Apache Kafka 3.9's classic GroupCoordinator: validation runs
in a fixed order — group id, coordinator state, session timeout, group existence, member,
generation, state — and the first failing check names the error.
"""

from __future__ import annotations

import pytest

from harness.cluster.targets import Target
from harness.raw_client import RawClient
from harness.waiting import wait_for
from harness.wire.errors import ErrorCode

from ..support import unique_name
from ._helpers import (
    DESCRIBE_CONFIGS,
    DESCRIBE_GROUPS,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    SUBSCRIPTION,
    SYNC_GROUP,
    WAIT_S,
    BackgroundJoin,
    RawFactory,
    V,
    coordinator_client,
    describe,
    err,
    find_coordinator,
    heartbeat,
    join,
    join_body,
    leave,
    rejoin_when_rebalancing,
    require_version,
    stable_member,
    sync,
)

MADE_UP_MEMBER = "made-up-member-0000"
# Not a missing capability: librdkafka's mock cluster runs inside the test process, and a
# JoinGroup with no protocols crashes it (segmentation fault), ending the whole session instead
# of failing one test.
MOCK_CRASHES = ("librdkafka's mock cluster crashes the test process (segmentation fault) on a "
                "JoinGroup with no protocols")
BROKER_RESOURCE = 4
MAX_GROUP_TO_FILL = 64


def _group(request: pytest.FixtureRequest) -> str:
    return unique_name(request, "g-")


# --- JoinGroup ----------------------------------------------------------------------------------


def test_join_naming_a_member_id_for_a_group_that_does_not_exist_is_unknown_member_id(
        kafka_target: Target, kafka_raw_client: RawFactory, request: pytest.FixtureRequest) -> None:
    """A JoinGroup with a member id for a group the coordinator does not have is refused with
    UNKNOWN_MEMBER_ID, and no group is created [Kafka GroupCoordinator.handleJoinGroup]."""
    group = _group(request)
    client = coordinator_client(kafka_raw_client, group, JOIN_GROUP)
    answer = client.request(JOIN_GROUP, V[JOIN_GROUP], join_body(group, MADE_UP_MEMBER))
    assert (err(answer), answer.member_id) == (ErrorCode.unknown_member_id, MADE_UP_MEMBER)
    assert answer.generation_id == -1


def test_join_with_a_member_id_the_group_never_gave_out_is_unknown_member_id(
        kafka_target: Target, kafka_raw_client: RawFactory, request: pytest.FixtureRequest) -> None:
    """A JoinGroup naming a member id the group does not know is refused with
    UNKNOWN_MEMBER_ID; the client is to rejoin with an empty id [protocol guide, JoinGroup]."""
    group = _group(request)
    client = coordinator_client(kafka_raw_client, group, JOIN_GROUP, SYNC_GROUP)
    stable_member(client, group)
    answer = client.request(JOIN_GROUP, V[JOIN_GROUP], join_body(group, MADE_UP_MEMBER))
    assert err(answer) == ErrorCode.unknown_member_id


@pytest.mark.parametrize("session_ms", [1, 2_147_483_647], ids=["below-min", "above-max"])
def test_join_with_a_session_timeout_outside_the_brokers_bounds_is_invalid_session_timeout(
        kafka_target: Target, kafka_raw_client: RawFactory, request: pytest.FixtureRequest,
        session_ms: int) -> None:
    """A session timeout below group.min.session.timeout.ms or above
    group.max.session.timeout.ms is refused with INVALID_SESSION_TIMEOUT before the group is
    looked at [Kafka broker configs group.min/max.session.timeout.ms; KIP-62]."""
    group = _group(request)
    client = coordinator_client(kafka_raw_client, group, JOIN_GROUP)
    answer = client.request(JOIN_GROUP, V[JOIN_GROUP], join_body(group, session_ms=session_ms))
    assert err(answer) == ErrorCode.invalid_session_timeout


@pytest.mark.parametrize(("protocol_type", "protocols"), [
    ("", [("range", SUBSCRIPTION)]),
    ("consumer", []),
], ids=["empty-protocol-type", "no-protocols"])
def test_the_first_join_without_a_protocol_type_or_protocols_is_inconsistent_group_protocol(
        kafka_target: Target, kafka_raw_client: RawFactory, request: pytest.FixtureRequest,
        protocol_type: str, protocols: list[tuple[str, bytes]]) -> None:
    """An empty group accepts a first member only with a protocol type and at least one
    protocol; otherwise INCONSISTENT_GROUP_PROTOCOL [Kafka GroupMetadata.supportsProtocols]."""
    if kafka_target.kind == "librdkafka-mock" and not protocols:
        pytest.skip(MOCK_CRASHES)
    group = _group(request)
    client = coordinator_client(kafka_raw_client, group, JOIN_GROUP)
    body = join_body(group, protocol_type=protocol_type)
    body["protocols"] = [{"name": n, "metadata": m} for n, m in protocols]
    assert err(client.request(JOIN_GROUP, V[JOIN_GROUP], body)) \
        == ErrorCode.inconsistent_group_protocol


def test_join_with_an_empty_group_id_is_invalid_group_id(
        kafka_target: Target, kafka_raw_client: RawFactory) -> None:
    """A JoinGroup for the empty group id is refused with INVALID_GROUP_ID, by whichever
    broker receives it, before any coordinator check [Kafka GroupCoordinator
    validateGroupStatus]."""
    client = kafka_raw_client()
    answer = client.request(JOIN_GROUP, V[JOIN_GROUP], join_body(""))
    assert err(answer) == ErrorCode.invalid_group_id


def test_a_static_join_with_another_members_id_is_fenced(
        kafka_target: Target, kafka_raw_client: RawFactory, request: pytest.FixtureRequest) -> None:
    """A JoinGroup naming a known group.instance.id with a member id other than the one that
    instance holds is refused with FENCED_INSTANCE_ID: a second process with the same
    instance id must shut down [KIP-345]."""
    group = _group(request)
    client = coordinator_client(kafka_raw_client, group, JOIN_GROUP, SYNC_GROUP)
    stable_member(client, group, instance="instance-1")
    body = join_body(group, MADE_UP_MEMBER, instance="instance-1")
    assert err(client.request(JOIN_GROUP, V[JOIN_GROUP], body)) == ErrorCode.fenced_instance_id


def test_a_new_member_beyond_group_max_size_is_refused(
        kafka_target: Target, kafka_raw_client: RawFactory, request: pytest.FixtureRequest) -> None:
    """A group holds at most group.max.size members; a new member joining a full group is
    refused with GROUP_MAX_SIZE_REACHED. Members that were only handed an id by
    MEMBER_ID_REQUIRED do not count [KIP-389; Apache Kafka 3.9 and 4.4 answer so].

    The group is filled as clients fill it: one member leads a first generation, the others
    join (their JoinGroups wait for the rebalance), and the first rejoins."""
    group = _group(request)
    probe = coordinator_client(kafka_raw_client, group, JOIN_GROUP, SYNC_GROUP, HEARTBEAT,
                               DESCRIBE_CONFIGS, DESCRIBE_GROUPS)
    limit = _group_max_size(probe, find_coordinator(probe, group).node_id)
    if limit > MAX_GROUP_TO_FILL:
        pytest.skip(f"the target's group.max.size is {limit}; the suite fills a group of at "
                    f"most {MAX_GROUP_TO_FILL} members (the harness's own targets set 6)")
    other = f"{group}-pending"
    waiting = coordinator_client(kafka_raw_client, other, JOIN_GROUP)
    pending = [err(waiting.request(JOIN_GROUP, V[JOIN_GROUP], join_body(other)))
               for _ in range(limit + 1)]
    assert pending == [ErrorCode.member_id_required] * (limit + 1), "pending members were counted"

    first = stable_member(probe, group)
    joining = [BackgroundJoin(coordinator_client(kafka_raw_client, group), group)
               for _ in range(limit - 1)]
    # A rebalance completes once every member of the last generation has rejoined: the first
    # member rejoins only when every new one is in the group, or the rebalance can complete
    # without the late ones (seen once on Apache Kafka 3.9.2: 5 members of 6).
    wait_for(lambda: len(describe(probe, group).members) == limit, WAIT_S,
             f"the {limit - 1} new members to have joined the rebalancing group", retry_on=())
    rejoined = rejoin_when_rebalancing(probe, group, first)
    answers = [rejoined, *(member.answer() for member in joining)]
    assert [err(a) for a in answers] == [ErrorCode.none] * limit
    assert len(rejoined.members) == limit
    assert err(probe.request(JOIN_GROUP, V[JOIN_GROUP], join_body(group))) \
        == ErrorCode.group_max_size_reached


def _group_max_size(client: RawClient, node: int) -> int:
    """group.max.size of broker ``node``, the one behind ``client``: a broker describes only its
    own static configs."""
    answer = client.request(DESCRIBE_CONFIGS, V[DESCRIBE_CONFIGS], {"resources": [{
        "resource_type": BROKER_RESOURCE, "resource_name": str(node),
        "configuration_keys": ["group.max.size"]}], "include_synonyms": False})
    (result,) = answer.results
    assert err(result) == ErrorCode.none, f"DescribeConfigs of broker {node}: {err(result)!r}"
    (config,) = [c for c in result.configs if c.name == "group.max.size"]
    return int(config.value)


# --- SyncGroup ----------------------------------------------------------------------------------


def test_sync_for_a_group_that_does_not_exist_is_unknown_member_id(
        kafka_target: Target, kafka_raw_client: RawFactory, request: pytest.FixtureRequest) -> None:
    """A SyncGroup for a group the coordinator does not have is refused with
    UNKNOWN_MEMBER_ID [Kafka GroupCoordinator.handleSyncGroup]."""
    group = _group(request)
    client = coordinator_client(kafka_raw_client, group, SYNC_GROUP)
    answer = client.request(SYNC_GROUP, V[SYNC_GROUP], {
        "group_id": group, "generation_id": 1, "member_id": MADE_UP_MEMBER,
        "group_instance_id": None, "assignments": []})
    assert err(answer) == ErrorCode.unknown_member_id


@pytest.mark.parametrize(("member", "generation_delta", "expected"), [
    (MADE_UP_MEMBER, 0, ErrorCode.unknown_member_id),
    (None, 1, ErrorCode.illegal_generation),
    (None, -1, ErrorCode.illegal_generation),
], ids=["unknown-member", "future-generation", "past-generation"])
def test_sync_is_checked_against_the_member_and_generation(
        kafka_target: Target, kafka_raw_client: RawFactory, request: pytest.FixtureRequest,
        member: str | None, generation_delta: int, expected: str) -> None:
    """A SyncGroup from a member the group does not have is UNKNOWN_MEMBER_ID; from a member
    at another generation, ILLEGAL_GENERATION [protocol guide, SyncGroup errors]."""
    group = _group(request)
    client = coordinator_client(kafka_raw_client, group, JOIN_GROUP, SYNC_GROUP)
    joined = stable_member(client, group)
    answer = client.request(SYNC_GROUP, V[SYNC_GROUP], {
        "group_id": group, "generation_id": joined.generation_id + generation_delta,
        "member_id": member or joined.member_id, "group_instance_id": None,
        "assignments": []})
    assert err(answer) == expected


def test_sync_while_the_group_prepares_a_rebalance_is_rebalance_in_progress(
        kafka_target: Target, kafka_raw_client: RawFactory, request: pytest.FixtureRequest) -> None:
    """A SyncGroup from a current member while the group is PreparingRebalance (a new member
    is waiting to join) is answered REBALANCE_IN_PROGRESS: the member must rejoin
    [Kafka GroupCoordinator.doSyncGroup]."""
    group = _group(request)
    client = coordinator_client(kafka_raw_client, group, JOIN_GROUP, SYNC_GROUP, HEARTBEAT)
    other = coordinator_client(kafka_raw_client, group, JOIN_GROUP, SYNC_GROUP)
    member = stable_member(client, group)
    joining = BackgroundJoin(other, group)

    def preparing() -> bool:
        joining.assert_pending()
        return heartbeat(client, group, member.member_id,
                         member.generation_id) == ErrorCode.rebalance_in_progress

    wait_for(preparing, WAIT_S, "the group to prepare a rebalance", retry_on=())
    assert err(sync(client, group, member)) == ErrorCode.rebalance_in_progress
    rejoined = join(client, group, member.member_id)
    assert err(rejoined) == err(joining.answer()) == ErrorCode.none


def test_sync_naming_another_members_instance_id_is_fenced(
        kafka_target: Target, kafka_raw_client: RawFactory, request: pytest.FixtureRequest) -> None:
    """A SyncGroup naming a static member's group.instance.id with another member id is
    refused with FENCED_INSTANCE_ID [KIP-345]."""
    group = _group(request)
    client = coordinator_client(kafka_raw_client, group, JOIN_GROUP, SYNC_GROUP)
    joined = stable_member(client, group, instance="instance-1")
    answer = client.request(SYNC_GROUP, V[SYNC_GROUP], {
        "group_id": group, "generation_id": joined.generation_id, "member_id": MADE_UP_MEMBER,
        "group_instance_id": "instance-1", "assignments": []})
    assert err(answer) == ErrorCode.fenced_instance_id


def test_sync_naming_a_protocol_the_group_did_not_choose_is_inconsistent_group_protocol(
        kafka_target: Target, kafka_raw_client: RawFactory, request: pytest.FixtureRequest) -> None:
    """SyncGroup v5+ names the protocol type and name the member believes the group chose; a
    mismatch is refused with INCONSISTENT_GROUP_PROTOCOL [KIP-559]."""
    group = _group(request)
    client = coordinator_client(kafka_raw_client, group, JOIN_GROUP, SYNC_GROUP)
    joined = stable_member(client, group)
    version = require_version(client, SYNC_GROUP, 5)
    base = {"group_id": group, "generation_id": joined.generation_id,
            "member_id": joined.member_id, "group_instance_id": None, "assignments": []}
    wrong_name = client.request(SYNC_GROUP, version,
                                {**base, "protocol_type": "consumer", "protocol_name": "sticky"})
    wrong_type = client.request(SYNC_GROUP, version,
                                {**base, "protocol_type": "connect", "protocol_name": "range"})
    right = client.request(SYNC_GROUP, version,
                           {**base, "protocol_type": "consumer", "protocol_name": "range"})
    assert (err(wrong_name), err(wrong_type), err(right)) \
        == (ErrorCode.inconsistent_group_protocol, ErrorCode.inconsistent_group_protocol,
            ErrorCode.none)
    assert (right.protocol_type, right.protocol_name) == ("consumer", "range")


# --- Heartbeat ----------------------------------------------------------------------------------


def test_heartbeat_for_a_group_that_does_not_exist_is_unknown_member_id(
        kafka_target: Target, kafka_raw_client: RawFactory, request: pytest.FixtureRequest) -> None:
    """A Heartbeat for a group the coordinator does not have is refused with
    UNKNOWN_MEMBER_ID [Kafka GroupCoordinator.handleHeartbeat]."""
    group = _group(request)
    client = coordinator_client(kafka_raw_client, group, HEARTBEAT)
    assert heartbeat(client, group, MADE_UP_MEMBER, 1) == ErrorCode.unknown_member_id


@pytest.mark.parametrize(("member", "generation_delta", "expected"), [
    (MADE_UP_MEMBER, 0, ErrorCode.unknown_member_id),
    (None, 1, ErrorCode.illegal_generation),
    (None, -1, ErrorCode.illegal_generation),
    (None, 0, ErrorCode.none),
], ids=["unknown-member", "future-generation", "past-generation", "current"])
def test_heartbeat_is_checked_against_the_member_and_generation(
        kafka_target: Target, kafka_raw_client: RawFactory, request: pytest.FixtureRequest,
        member: str | None, generation_delta: int, expected: str) -> None:
    """A Heartbeat of a Stable group is NONE only from a current member at the current
    generation: UNKNOWN_MEMBER_ID for a member it does not have, ILLEGAL_GENERATION for
    another generation [protocol guide, Heartbeat errors]."""
    group = _group(request)
    client = coordinator_client(kafka_raw_client, group, JOIN_GROUP, SYNC_GROUP, HEARTBEAT)
    joined = stable_member(client, group)
    assert heartbeat(client, group, member or joined.member_id,
                     joined.generation_id + generation_delta) == expected


def test_heartbeat_while_the_leader_has_not_synced_is_accepted(
        kafka_target: Target, kafka_raw_client: RawFactory, request: pytest.FixtureRequest) -> None:
    """A member may heartbeat as soon as its JoinGroup is answered: in CompletingRebalance (the
    leader's SyncGroup not yet in) a current member's Heartbeat is NONE, so a slow leader does
    not get the others evicted [Kafka GroupCoordinator.handleHeartbeat, KAFKA-7126]."""
    group = _group(request)
    client = coordinator_client(kafka_raw_client, group, JOIN_GROUP, HEARTBEAT)
    joined = join(client, group)
    assert err(joined) == ErrorCode.none
    assert heartbeat(client, group, joined.member_id, joined.generation_id) == ErrorCode.none
    assert heartbeat(client, group, joined.member_id, joined.generation_id + 1) \
        == ErrorCode.illegal_generation


def test_heartbeat_naming_another_members_instance_id_is_fenced(
        kafka_target: Target, kafka_raw_client: RawFactory, request: pytest.FixtureRequest) -> None:
    """A Heartbeat naming a static member's group.instance.id with another member id is
    refused with FENCED_INSTANCE_ID [KIP-345]."""
    group = _group(request)
    client = coordinator_client(kafka_raw_client, group, JOIN_GROUP, SYNC_GROUP, HEARTBEAT)
    joined = stable_member(client, group, instance="instance-1")
    assert heartbeat(client, group, MADE_UP_MEMBER, joined.generation_id, "instance-1") \
        == ErrorCode.fenced_instance_id


def test_heartbeat_with_an_empty_group_id_is_invalid_group_id(
        kafka_target: Target, kafka_raw_client: RawFactory) -> None:
    """A Heartbeat for the empty group id is refused with INVALID_GROUP_ID, by whichever
    broker receives it [Kafka GroupCoordinator validateGroupStatus]."""
    assert heartbeat(kafka_raw_client(), "", MADE_UP_MEMBER, 1) == ErrorCode.invalid_group_id


# --- LeaveGroup ---------------------------------------------------------------------------------


def test_leaving_a_group_that_does_not_exist_answers_unknown_member_id_per_member(
        kafka_target: Target, kafka_raw_client: RawFactory, request: pytest.FixtureRequest) -> None:
    """LeaveGroup v3+ answers per member: for a group the coordinator does not have, the
    request succeeds and every member is UNKNOWN_MEMBER_ID [KIP-345; Kafka
    GroupCoordinator.handleLeaveGroup]."""
    group = _group(request)
    client = coordinator_client(kafka_raw_client, group, LEAVE_GROUP)
    answer = leave(client, group, (MADE_UP_MEMBER, None), ("another-made-up", None))
    assert err(answer) == ErrorCode.none
    assert [(m.member_id, err(m)) for m in answer.members] \
        == [(MADE_UP_MEMBER, ErrorCode.unknown_member_id),
            ("another-made-up", ErrorCode.unknown_member_id)]


def test_a_batched_leave_removes_the_known_members_and_names_the_unknown_ones(
        kafka_target: Target, kafka_raw_client: RawFactory, request: pytest.FixtureRequest) -> None:
    """A batched LeaveGroup removes each known member and answers UNKNOWN_MEMBER_ID for each
    member the group does not have, in request order, with no request-level error [KIP-345]."""
    group = _group(request)
    client = coordinator_client(kafka_raw_client, group, JOIN_GROUP, SYNC_GROUP, HEARTBEAT,
                                LEAVE_GROUP)
    joined = stable_member(client, group)
    answer = leave(client, group, (MADE_UP_MEMBER, None), (joined.member_id, None))
    assert err(answer) == ErrorCode.none
    assert [(m.member_id, err(m)) for m in answer.members] \
        == [(MADE_UP_MEMBER, ErrorCode.unknown_member_id), (joined.member_id, ErrorCode.none)]
    assert heartbeat(client, group, joined.member_id, joined.generation_id) \
        == ErrorCode.unknown_member_id


def test_leave_with_an_empty_group_id_is_invalid_group_id(
        kafka_target: Target, kafka_raw_client: RawFactory) -> None:
    """A LeaveGroup for the empty group id is refused with INVALID_GROUP_ID at the request
    level [Kafka GroupCoordinator validateGroupStatus]."""
    answer = leave(kafka_raw_client(), "", (MADE_UP_MEMBER, None))
    assert err(answer) == ErrorCode.invalid_group_id
