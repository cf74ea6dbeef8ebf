"""The consumer group protocol of KIP-848 (Kafka 4): ConsumerGroupHeartbeat and
ConsumerGroupDescribe, with raw requests, and one pair of real ``group.protocol=consumer``
clients.

The coordinator, not a leader client, computes the assignment; members learn it from their
heartbeats and every change is fenced by epochs: the group epoch counts changes of the group,
a member's epoch the assignment it reconciled to. The expectations were measured on Apache
Kafka 4.4 in KRaft mode (its defaults: assignors ``uniform, range``, migration policy
``bidirectional``, a heartbeat interval of 5 s, assignments computed asynchronously at most once
a second). A target that does not offer the KIP-848 APIs at version 1 skips every test here.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka.admin import NewTopic

from harness.cluster.targets import Target
from harness.raw_client import RawClient
from harness.waiting import wait_for
from harness.wire.errors import ErrorCode
from harness.wire.group_records import decode_assignment, encode_subscription

from ..support import produce_all, unique_name, wait_for_topic
from ._consumer_protocol import (
    CLASSIC_MEMBER,
    CONSUMER_GROUP_DESCRIBE,
    CONSUMER_GROUP_HEARTBEAT,
    CONSUMER_MEMBER,
    DESCRIBE_V,
    REBALANCE_TIMEOUT_MS,
    TEMPORARY_LEAVE_EPOCH,
    Member,
    consumer_group_client,
    describe,
    described_members,
    flatten,
    heartbeat_body,
    heartbeat_until,
    leave_all,
    partitions_of,
    require_consumer_protocol,
    settle,
    topic_ids,
)
from ._helpers import WAIT_S, RawFactory, coordinator_client, err, heartbeat, join, leave, sync

MakeMember = Callable[..., Member]


@pytest.fixture
def make_member(kafka_raw_client: RawFactory) -> Iterator[MakeMember]:
    """``make_member(client, group, **Member options)``; every member still in its group
    leaves when the test ends (before its connection closes), so the group is left empty."""
    made: list[Member] = []

    def make(client: RawClient, group: str, **options: Any) -> Member:
        member = Member(client, group, **options)
        made.append(member)
        return member

    yield make
    list(leave_all(made))  # best effort: a failed test's member may be fenced already


def _group(request: pytest.FixtureRequest) -> str:
    return unique_name(request, "g-")


# --- member epochs and fencing --------------------------------------------------------------


def test_a_joining_member_keeps_its_own_member_id_and_gets_an_epoch(
        kafka_target: Target, kafka_raw_client: RawFactory, make_topic: Callable[..., str],
        make_member: MakeMember, request: pytest.FixtureRequest) -> None:
    """A heartbeat with member epoch 0 joins: the answer keeps the member id the client
    generated (v1, KIP-1082) and gives a member epoch above 0 and the heartbeat interval
    [KIP-848 ConsumerGroupHeartbeat; KIP-1082]. At v1 an empty member id is INVALID_REQUEST
    ("MemberId can't be empty."); at v0 the coordinator generates the id instead
    [GroupCoordinatorService.throwIfConsumerGroupHeartbeatRequestIsInvalid]."""
    group = _group(request)
    client = consumer_group_client(kafka_raw_client, group)
    topic = make_topic(partitions=2)
    member = make_member(client, group, topics=[topic])
    chosen = member.member_id

    joined = member.join()
    assert joined.member_id == chosen
    assert joined.member_epoch > 0 and joined.heartbeat_interval.total_seconds() > 0
    listed = described_members(describe(client, group))
    assert list(listed) == [chosen] and listed[chosen].member_epoch == joined.member_epoch

    nameless = client.request(CONSUMER_GROUP_HEARTBEAT, 1, heartbeat_body(
        group, "", 0, subscribed_topic_names=[topic], topic_partitions=[],
        rebalance_timeout=REBALANCE_TIMEOUT_MS))
    assert err(nameless) == ErrorCode.invalid_request, nameless.error_message

    low, _ = client.advertised().get(CONSUMER_GROUP_HEARTBEAT, (1, 1))
    if low == 0:  # the first version: the coordinator names the member
        given = client.request(CONSUMER_GROUP_HEARTBEAT, 0, heartbeat_body(
            group, "", 0, subscribed_topic_names=[topic], topic_partitions=[],
            rebalance_timeout=REBALANCE_TIMEOUT_MS))
        assert err(given) == ErrorCode.none, given.error_message
        assert given.member_id and given.member_epoch > 0
        left = client.request(CONSUMER_GROUP_HEARTBEAT, 0,
                              heartbeat_body(group, given.member_id, -1))
        assert err(left) == ErrorCode.none


def test_a_heartbeat_at_a_wrong_epoch_is_fenced_and_an_unknown_member_is_refused(
        kafka_target: Target, kafka_raw_client: RawFactory, make_topic: Callable[..., str],
        make_member: MakeMember, request: pytest.FixtureRequest) -> None:
    """A heartbeat with an epoch above the member's, or below it and not its previous epoch,
    is answered FENCED_MEMBER_EPOCH; a member id the group does not have is answered
    UNKNOWN_MEMBER_ID [KIP-848, member epoch; GroupMetadataManager
    .throwIfConsumerGroupMemberEpochIsInvalid]. A fenced member rejoins with epoch 0 and its
    own member id [KIP-848; ConsumerGroupMember].

    The member is moved through two epochs first (subscription changes bump the group epoch),
    so its first epoch is stale and not the previous one, which Kafka still tolerates."""
    group = _group(request)
    client = consumer_group_client(kafka_raw_client, group)
    first, second = make_topic(partitions=1), make_topic(partitions=1)
    member = make_member(client, group, topics=[first])
    stale = member.join().member_epoch
    for topics in ([first, second], [first]):
        before = member.epoch

        def moved(m: Member, before: int = before) -> bool:
            return m.epoch > before

        heartbeat_until(member, moved,
                        f"the member to move past epoch {before} after subscribing to {topics}",
                        subscribed_topic_names=topics)
    current = member.epoch
    assert stale < current - 1

    for wrong in (current + 1, stale):
        fenced = member.send(wrong, topic_partitions=[])
        assert err(fenced) == ErrorCode.fenced_member_epoch, \
            f"epoch {wrong} (the member is at {current}): {fenced.error_message}"
    unknown = member.send(current, member_id=str(uuid.uuid4()))
    assert err(unknown) == ErrorCode.unknown_member_id, unknown.error_message

    rejoined = member.join()
    assert rejoined.member_id == member.member_id and rejoined.member_epoch >= current


def test_leaving_with_epoch_minus_one_removes_the_member(
        kafka_target: Target, kafka_raw_client: RawFactory, make_topic: Callable[..., str],
        make_member: MakeMember, request: pytest.FixtureRequest) -> None:
    """A heartbeat with member epoch -1 leaves the group: the answer echoes epoch -1, the
    member is gone from ConsumerGroupDescribe at once (the group, now without members, is
    Empty and its epoch bumped) and its id is then unknown [KIP-848 ConsumerGroupHeartbeat,
    "-1 to leave"; GroupMetadataManager.consumerGroupLeave]."""
    group = _group(request)
    client = consumer_group_client(kafka_raw_client, group)
    member = make_member(client, group, topics=[make_topic(partitions=1)])
    epoch = member.join().member_epoch
    before = describe(client, group)
    assert list(described_members(before)) == [member.member_id]

    member.leave()
    after = describe(client, group)
    assert (list(after.members), after.group_state) == ([], "Empty")
    assert after.group_epoch > before.group_epoch
    gone = member.send(epoch)
    assert err(gone) == ErrorCode.unknown_member_id, gone.error_message


# --- reconciliation ---------------------------------------------------------------------------


def test_a_new_member_gets_partitions_only_after_their_owner_revoked_them(
        kafka_target: Target, kafka_raw_client: RawFactory, make_topic: Callable[..., str],
        make_member: MakeMember, request: pytest.FixtureRequest) -> None:
    """A second member's join bumps the group epoch; the first member is told to revoke part
    of its partitions and keeps its epoch until it reports them revoked; only then does the
    newcomer get them, so no partition is ever held by two members; the shares end disjoint
    and complete, every member at the new group epoch. When a member leaves, the other gets
    everything back at a later epoch [KIP-848, "the assignment process" and reconciliation;
    CurrentAssignmentBuilder; MemberState.UNREVOKED_PARTITIONS]."""
    group = _group(request)
    client = consumer_group_client(kafka_raw_client, group)
    topic = make_topic(partitions=4)
    every = partitions_of(topic_ids(client, topic), {topic: 4})
    first = make_member(client, group, topics=[topic])
    second = make_member(coordinator_client(kafka_raw_client, group), group, topics=[topic])
    first.join()
    alone = settle([first], every, "the first member to own every partition")
    assert first.assigned == every

    second.join()
    joined = describe(client, group)
    assert joined.group_epoch > alone.group_epoch
    held_epoch = first.epoch
    heartbeat_until(first, lambda m: m.assigned < m.owned,
                    "the first member to be told to revoke partitions", ack=False,
                    others=[second])
    assert first.epoch == held_epoch, "the epoch moved before the revocation was acknowledged"
    unrevoked = first.owned - first.assigned
    for _ in range(3):  # while it still owns them, they go to nobody else
        second.heartbeat()
        assert not second.assigned & unrevoked, f"{second.assigned} given before revocation"

    first.reconcile()
    first.heartbeat()  # reports the partitions revoked: the member moves to the new epoch
    assert first.epoch > held_epoch
    final = settle([first, second], every, "the two members to split the topic")
    assert final.group_epoch > alone.group_epoch
    assert first.assigned and second.assigned and not first.assigned & second.assigned
    shown = described_members(final)
    for member in (first, second):
        assert flatten(shown[member.member_id].assignment.topic_partitions) == member.assigned

    second.leave()
    back = settle([first], every, "the remaining member to own every partition again")
    assert back.group_epoch > final.group_epoch and first.assigned == every


# --- server-side assignors --------------------------------------------------------------------


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_the_server_assignor_a_member_names_assigns_the_group(
        kafka_target: Target, kafka_raw_client: RawFactory, make_topic: Callable[..., str],
        make_member: MakeMember, request: pytest.FixtureRequest, assignor: str) -> None:
    """``server_assignor`` names one of the coordinator's assignors (Kafka's defaults:
    ``uniform`` and ``range``, group.consumer.assignors); the group uses it, ConsumerGroupDescribe
    names it in ``assignor_name``, and it splits the partitions between the members [KIP-848
    server-side assignor; GroupMetadataManager, ConsumerGroup.preferredServerAssignor]."""
    group = _group(request)
    client = consumer_group_client(kafka_raw_client, group)
    topic = make_topic(partitions=4)
    every = partitions_of(topic_ids(client, topic), {topic: 4})
    members = [make_member(client, group, topics=[topic], assignor=assignor) for _ in range(2)]
    for member in members:
        member.join()
    final = settle(members, every, f"the {assignor} assignor to split the topic")
    assert final.assignor_name == assignor
    assert all(len(member.assigned) == 2 for member in members)


def test_an_unknown_server_assignor_is_unsupported_assignor(
        kafka_target: Target, kafka_raw_client: RawFactory, make_topic: Callable[..., str],
        make_member: MakeMember, request: pytest.FixtureRequest) -> None:
    """A ``server_assignor`` the coordinator does not have is refused with
    UNSUPPORTED_ASSIGNOR and the member is not added [KIP-848 ConsumerGroupHeartbeat errors;
    GroupCoordinatorService.throwIfConsumerGroupHeartbeatRequestIsInvalid]."""
    group = _group(request)
    client = consumer_group_client(kafka_raw_client, group)
    topic = make_topic(partitions=1)
    member = make_member(client, group, topics=[topic], assignor="no-such-assignor")
    refused = member.send(0, subscribed_topic_names=[topic], server_assignor="no-such-assignor",
                          rebalance_timeout=REBALANCE_TIMEOUT_MS, topic_partitions=[])
    assert err(refused) == ErrorCode.unsupported_assignor, refused.error_message
    answer: Any = client.request(CONSUMER_GROUP_DESCRIBE, DESCRIBE_V, {
        "group_ids": [group], "include_authorized_operations": False})
    assert err(answer.groups[0]) == ErrorCode.group_id_not_found


# --- static membership ------------------------------------------------------------------------


def test_a_static_member_that_leaves_for_now_gets_its_assignment_back(
        kafka_target: Target, kafka_raw_client: RawFactory, make_topic: Callable[..., str],
        make_member: MakeMember, request: pytest.FixtureRequest) -> None:
    """A static member (``instance_id``) that leaves with epoch -2 stays in the group with its
    assignment and epoch -2, and nothing is rebalanced (the group epoch does not move); a new
    member id joining with the same instance id takes its place with the same assignment and
    epoch at once, and the old member id is then FENCED_INSTANCE_ID [KIP-848 static
    membership, "-2 to leave temporarily"; GroupMetadataManager
    .consumerGroupStaticMemberGroupLeave, ConsumerGroupMember]."""
    group = _group(request)
    client = consumer_group_client(kafka_raw_client, group)
    topic = make_topic(partitions=4)
    every = partitions_of(topic_ids(client, topic), {topic: 4})
    static = make_member(client, group, topics=[topic], instance="instance-1")
    other = make_member(client, group, topics=[topic])
    static.join()
    other.join()
    before = settle([static, other], every, "the two members to split the topic")
    share, epoch, old_id = static.assigned, static.epoch, static.member_id

    static.leave(TEMPORARY_LEAVE_EPOCH)
    away = describe(client, group)
    kept = described_members(away)[old_id]
    assert (kept.instance_id, kept.member_epoch) == ("instance-1", TEMPORARY_LEAVE_EPOCH)
    assert flatten(kept.assignment.topic_partitions) == share
    assert away.group_epoch == before.group_epoch, "a temporary leave rebalanced the group"
    other.heartbeat()
    assert not other.assigned & share

    restarted = make_member(client, group, topics=[topic], instance="instance-1")
    back = restarted.join()
    assert (back.member_epoch, restarted.assigned) == (epoch, share)
    after = describe(client, group)
    assert after.group_epoch == before.group_epoch
    assert set(described_members(after)) == {restarted.member_id, other.member_id}
    stale = static.send(epoch)
    assert err(stale) == ErrorCode.fenced_instance_id, stale.error_message


def test_an_instance_id_in_use_is_unreleased_instance_id(
        kafka_target: Target, kafka_raw_client: RawFactory, make_topic: Callable[..., str],
        make_member: MakeMember, request: pytest.FixtureRequest) -> None:
    """A member joining with an instance id that an active member of the group holds is
    refused with UNRELEASED_INSTANCE_ID and the holder stays; once the holder has left for good
    (epoch -1) the instance id is free [KIP-848 static membership; GroupMetadataManager
    .throwIfInstanceIdIsUnreleased]."""
    group = _group(request)
    client = consumer_group_client(kafka_raw_client, group)
    topic = make_topic(partitions=1)
    holder = make_member(client, group, topics=[topic], instance="instance-1")
    holder.join()
    second = make_member(client, group, topics=[topic], instance="instance-1")
    refused = second.send(0, subscribed_topic_names=[topic], topic_partitions=[],
                          rebalance_timeout=REBALANCE_TIMEOUT_MS)
    assert err(refused) == ErrorCode.unreleased_instance_id, refused.error_message
    assert list(described_members(describe(client, group))) == [holder.member_id]
    holder.heartbeat()

    holder.leave()
    assert second.join().member_epoch > 0
    assert list(described_members(describe(client, group))) == [second.member_id]


# --- regular-expression subscriptions ---------------------------------------------------------


def _re2_literal(text: str) -> str:
    """`text` as an RE2 pattern matching itself (topic names only use [a-zA-Z0-9._-])."""
    return text.replace(".", r"\.")


def test_a_regex_subscription_is_assigned_the_matching_topics_only(
        kafka_target: Target, kafka_raw_client: RawFactory, kafka_admin: Any,
        make_member: MakeMember, request: pytest.FixtureRequest) -> None:
    """A member subscribing with ``subscribed_topic_regex`` (RE2J syntax, matched against whole
    topic names) is assigned every partition of the matching topics and never one of another;
    the coordinator resolves the regex asynchronously, so the partitions come in a heartbeat
    after the join [KIP-848 "regular expressions"; GroupMetadataManager
    .maybeUpdateRegularExpressions].

    Kafka 4.4 resolves a group's regexes against its coordinator's metadata image and
    re-resolves them at most every 10 s (REGEX_BATCH_REFRESH_MIN_INTERVAL_MS): a regex resolved
    just before that image had the new topics is only assigned them 10 s later (measured: half
    the runs). So a member subscribed to the topics by name is first assigned all of them
    (which only that image allows) and leaves; then the regex member joins."""
    group = _group(request)
    client = consumer_group_client(kafka_raw_client, group)
    base = unique_name(request, "rx")
    counts = {f"{base}-in-1": 2, f"{base}-in-2": 1, f"{base}-out": 2}
    futures = kafka_admin.create_topics(
        [NewTopic(t, n, min(3, kafka_target.brokers)) for t, n in counts.items()],
        operation_timeout=30)
    for topic, count in counts.items():
        futures[topic].result(60)
        wait_for_topic(kafka_admin, topic, count)
    ids = topic_ids(client, *counts)
    probe = make_member(client, group, topics=list(counts))
    probe.join()
    settle([probe], partitions_of(ids, counts), "the coordinator to assign the new topics")
    probe.leave()

    matching = partitions_of(ids, {t: n for t, n in counts.items() if "-in-" in t})
    regex = _re2_literal(base) + "-in-.*"
    member = make_member(client, group, regex=regex)
    member.join()

    def matched(m: Member) -> bool:
        assert m.assigned <= matching, f"assigned {m.assigned - matching}, not matching {regex}"
        return m.assigned == matching

    heartbeat_until(member, matched, f"the partitions of the topics matching {regex}")
    shown = described_members(describe(client, group))[member.member_id]
    assert (shown.subscribed_topic_regex, list(shown.subscribed_topic_names)) == (regex, [])
    assert {tp.topic_name for tp in shown.assignment.topic_partitions} \
        == {f"{base}-in-1", f"{base}-in-2"}


def test_an_invalid_regex_is_invalid_regular_expression(
        kafka_target: Target, kafka_raw_client: RawFactory, make_member: MakeMember,
        request: pytest.FixtureRequest) -> None:
    """A ``subscribed_topic_regex`` that does not compile is refused with
    INVALID_REGULAR_EXPRESSION [KIP-848 ConsumerGroupHeartbeat v1 errors;
    coordinator Utils.throwIfRegularExpressionIsInvalid]."""
    group = _group(request)
    client = consumer_group_client(kafka_raw_client, group)
    member = make_member(client, group, regex="(")
    refused = member.send(0, subscribed_topic_regex="(", topic_partitions=[],
                          rebalance_timeout=REBALANCE_TIMEOUT_MS)
    assert err(refused) == ErrorCode.invalid_regular_expression, refused.error_message


# --- a classic member in a consumer group -----------------------------------------------------


def test_a_classic_member_joins_a_consumer_group_and_the_coordinator_assigns_it(
        kafka_target: Target, kafka_raw_client: RawFactory, make_topic: Callable[..., str],
        make_member: MakeMember, request: pytest.FixtureRequest) -> None:
    """With the default ``group.consumer.migration.policy`` (bidirectional) a classic consumer
    may join a group of consumer-protocol members: its JoinGroup is answered at once with no
    leader and no member list (the coordinator assigns, not a leader), its generation is its
    member epoch, ConsumerGroupDescribe lists it as a classic member, and SyncGroup hands it
    the coordinator's assignment in the ConsumerProtocol format once the consumer member has
    revoked its share, heartbeats saying REBALANCE_IN_PROGRESS when it changes. A JoinGroup of
    another protocol type is INCONSISTENT_GROUP_PROTOCOL [KIP-848 "upgrade and downgrade";
    GroupMetadataManager.classicGroupJoinToConsumerGroup]."""
    group = _group(request)
    client = consumer_group_client(kafka_raw_client, group)
    classic = coordinator_client(kafka_raw_client, group)
    topic = make_topic(partitions=4)
    every = partitions_of(topic_ids(client, topic), {topic: 4})
    member = make_member(client, group, topics=[topic])
    member.join()
    settle([member], every, "the consumer member to own every partition")
    protocols = [("range", encode_subscription([topic]))]

    joined = join(classic, group, protocols=protocols)
    assert err(joined) == ErrorCode.none
    assert (joined.leader, list(joined.members), joined.protocol_name) == ("", [], "range")
    shown = described_members(describe(client, group))
    assert shown[member.member_id].member_type == CONSUMER_MEMBER
    listed = shown[joined.member_id]
    assert (listed.member_type, listed.member_epoch) == (CLASSIC_MEMBER, joined.generation_id)
    assert list(listed.subscribed_topic_names) == [topic]

    share: dict[str, list[int]] = {}

    def classic_assigned() -> bool:
        nonlocal joined, share
        member.heartbeat()
        beat = heartbeat(classic, group, joined.member_id, joined.generation_id)
        if beat == ErrorCode.rebalance_in_progress:
            joined = join(classic, group, joined.member_id, protocols=protocols)
            assert err(joined) == ErrorCode.none
            synced = sync(classic, group, joined)
            assert err(synced) == ErrorCode.none
            share = decode_assignment(synced.assignment)
        else:
            assert beat == ErrorCode.none, beat
        held = frozenset(p for _, p in member.assigned)
        assert not held & set(share.get(topic, [])), f"{sorted(held)} and {share} overlap"
        return bool(share) and held | set(share[topic]) == set(range(4))

    wait_for(classic_assigned, WAIT_S, "the classic member to be assigned its share",
             interval=0.2, retry_on=())
    assert set(share) == {topic}

    other = join(coordinator_client(kafka_raw_client, group), group, protocols=protocols,
                 protocol_type="not-consumer")
    assert err(other) == ErrorCode.inconsistent_group_protocol
    assert err(leave(classic, group, (joined.member_id, None))) == ErrorCode.none


# --- real clients -----------------------------------------------------------------------------


def test_two_consumer_protocol_clients_share_a_topic_and_read_every_record(
        kafka_target: Target, kafka_raw_client: RawFactory, kafka_consumer: Callable[..., Any],
        kafka_producer: Callable[..., Any], make_topic: Callable[..., str],
        request: pytest.FixtureRequest) -> None:
    """Two confluent-kafka consumers with ``group.protocol=consumer`` in one group get
    disjoint shares of the topic's partitions that cover it, the group lists both as
    consumer-protocol members, and together they read every record produced, each from its own
    partitions only [KIP-848; librdkafka's KIP-848 consumer]."""
    require_consumer_protocol(kafka_raw_client())
    topic = make_topic(partitions=4)
    group = _group(request)
    raw = coordinator_client(kafka_raw_client, group)
    config = {"group.id": group, "group.protocol": "consumer", "auto.offset.reset": "earliest",
              "enable.auto.commit": False}
    consumers = [kafka_consumer(**config) for _ in range(2)]
    for consumer in consumers:
        consumer.subscribe([topic])
    got: list[dict[tuple[int, int], bytes]] = [{}, {}]

    def poll_all() -> list[set[int]]:
        for consumer, records in zip(consumers, got, strict=True):
            for message in consumer.consume(num_messages=100, timeout=0.1):
                assert message.error() is None, message.error()
                records[(message.partition(), message.offset())] = message.value()
        return [{tp.partition for tp in c.assignment() if tp.topic == topic} for c in consumers]

    def split() -> list[set[int]] | None:
        """The consumers' shares once they are disjoint, cover the topic, and are what the
        coordinator's Stable group says each member has."""
        shares = poll_all()
        if not (all(shares) and not shares[0] & shares[1]
                and shares[0] | shares[1] == set(range(4))):
            return None
        group_now = describe(raw, group)
        shown = described_members(group_now)
        members = {c.memberid(): share for c, share in zip(consumers, shares, strict=True)}
        if group_now.group_state != "Stable" or set(shown) != set(members):
            return None
        assert {m.member_type for m in shown.values()} == {CONSUMER_MEMBER}
        seen = {m: {p for tp in shown[m].assignment.topic_partitions for p in tp.partitions}
                for m in members}
        return shares if seen == members else None

    shares = wait_for(split, WAIT_S, "the two consumers to split the topic", retry_on=())

    producer = kafka_producer()
    sent = {f"record-{p}-{i}".encode() for p in range(4) for i in range(10)}
    for partition in range(4):
        produce_all(producer, topic, [f"record-{partition}-{i}".encode() for i in range(10)],
                    partition=partition)

    def everything_read() -> bool:
        poll_all()
        return sum(len(records) for records in got) == len(sent)

    wait_for(everything_read, WAIT_S, f"the consumers to read {len(sent)} records",
             interval=0.05, retry_on=())
    assert set(got[0].values()) | set(got[1].values()) == sent
    for share, records in zip(shares, got, strict=True):
        assert {partition for partition, _ in records} <= share
