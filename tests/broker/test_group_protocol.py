"""Every classic-group error path a client can meet, through raw requests (harness.wire)."""

import time
import uuid

import pytest

from harness.raw_client import RawClient
from harness.waiting import wait_for
from harness.wire.errors import ErrorCode
from harness.wire.group_records import encode_subscription
from harness.wire.protocol import to_plain
from tests.broker.dispatch_marker import Marker

FIND, JOIN, HEARTBEAT, LEAVE, SYNC, DESCRIBE = 10, 11, 12, 13, 14, 15
META = encode_subscription(["t"])
WAIT_S = 10  # generous: each awaited event takes milliseconds on an idle machine

# SyncGroup v5 names its protocol type and name (mandatory from v5, KIP-559), as clients do.
NAMED = {"protocol_type": "consumer", "protocol_name": "range"}


def err(response) -> ErrorCode:
    """A response's (or a response part's) error code, as the enum the broker answers with."""
    return ErrorCode(int(response.error_code))


def described(observer, group):
    """DescribeGroups v5 of one group, asked on a connection of its own (a member's
    connection may have a group request parked, and its group requests run one at a time)."""
    return observer.request(DESCRIBE, 5, {"groups": [group],
                                          "include_authorized_operations": False}).groups[0]


def wait_for_state(observer, group, state):
    seen = []

    def reached():
        seen.append(described(observer, group).group_state)
        return seen[-1] == state

    try:
        wait_for(reached, WAIT_S, f"group {group} to be {state}")
    except TimeoutError as exc:
        raise AssertionError(f"{exc}; states seen: {sorted(set(seen))}") from None




@pytest.fixture
def client(group_broker):
    with RawClient(group_broker.host, group_broker.port) as raw:
        # As real clients do: asking for a coordinator creates __consumer_offsets.
        assert err(raw.request(FIND, 3, {"key": "any", "key_type": 0})) == ErrorCode.none
        yield raw


def new_group():
    return f"g-{uuid.uuid4().hex[:8]}"


def join_body(group, member_id="", session=10_000, protocols=(("range", META),), instance=None,
              protocol_type="consumer", rebalance=5000):
    return {"group_id": group, "session_timeout": session, "rebalance_timeout": rebalance,
            "member_id": member_id, "group_instance_id": instance,
            "protocol_type": protocol_type,
            "protocols": [{"name": n, "metadata": m} for n, m in protocols]}


def joined_member(client, group, **kwargs):
    """A member through the v5 two-step join (MEMBER_ID_REQUIRED, then the real join)."""
    first = client.request(JOIN, 5, join_body(group, **kwargs))
    assert err(first) == ErrorCode.member_id_required and first.member_id
    second = client.request(JOIN, 5, join_body(group, first.member_id, **kwargs))
    assert err(second) == ErrorCode.none, err(second)
    return second


def stable_member(client, group, **kwargs):
    joined = joined_member(client, group, **kwargs)
    synced = client.request(SYNC, 5, {"group_id": group, "generation_id": joined.generation_id,
                                      "member_id": joined.member_id,
                                      "protocol_type": "consumer", "protocol_name": "range",
                                      "assignments": [{"member_id": joined.member_id,
                                                       "assignment": b"A"}]})
    assert err(synced) == ErrorCode.none and synced.assignment == b"A"
    return joined


def test_find_coordinator_single_and_batched(client, group_broker):
    single = client.request(FIND, 3, {"key": new_group(), "key_type": 0})
    assert err(single) == ErrorCode.none
    assert (single.node_id, single.host, single.port) == (0, group_broker.host, group_broker.port)
    batched = client.request(FIND, 4, {"key_type": 0, "coordinator_keys": ["a", "b"]})
    assert [(c.key, c.node_id, err(c)) for c in batched.coordinators] \
        == [("a", 0, ErrorCode.none), ("b", 0, ErrorCode.none)]
    txn = client.request(FIND, 4, {"key_type": 1, "coordinator_keys": ["txn"]})
    assert [(c.node_id, err(c)) for c in txn.coordinators] == [(0, ErrorCode.none)]
    share = client.request(FIND, 4, {"key_type": 2, "coordinator_keys": ["share"]})
    assert err(share.coordinators[0]) == ErrorCode.invalid_request  # no share groups
    assert err(client.request(FIND, 0, {"key": "legacy"})) == ErrorCode.none


def test_v4_first_join_requires_a_member_id_and_older_versions_do_not(client):
    group = new_group()
    joined = joined_member(client, group)
    assert joined.leader == joined.member_id and joined.generation_id == 1
    assert [m.member_id for m in joined.members] == [joined.member_id]
    old = client.request(JOIN, 3, join_body(new_group()))
    assert err(old) == ErrorCode.none and old.member_id


def test_join_validation_errors(client):
    group = new_group()
    assert err(client.request(JOIN, 5, join_body(group, session=10))) \
        == ErrorCode.invalid_session_timeout
    assert err(client.request(JOIN, 5, join_body(group, session=10**9))) \
        == ErrorCode.invalid_session_timeout
    assert err(client.request(JOIN, 5, join_body(group, "ghost"))) == ErrorCode.unknown_member_id
    joined_member(client, group)
    other = client.request(JOIN, 5, join_body(group, protocols=(("roundrobin", META),)))
    assert err(other) == ErrorCode.inconsistent_group_protocol
    wrong_type = client.request(JOIN, 5, join_body(group, protocol_type="connect"))
    assert err(wrong_type) == ErrorCode.inconsistent_group_protocol


def test_members_only_handed_an_id_do_not_count_towards_group_max_size(client):
    """As Apache Kafka 3.9 answers: group.max.size (3 here) counts members, not the ids
    MEMBER_ID_REQUIRED hands out; suites/groups fills a group and sees GROUP_MAX_SIZE_REACHED."""
    group = new_group()
    pending = [client.request(JOIN, 5, join_body(group)) for _ in range(4)]
    assert [err(p) for p in pending] == [ErrorCode.member_id_required] * 4


def test_sync_and_heartbeat_errors(client):
    group = new_group()
    joined = joined_member(client, group)
    base = {"group_id": group, "member_id": joined.member_id,
            "generation_id": joined.generation_id}
    assert err(client.request(SYNC, 5, {**base, **NAMED, "generation_id": 99,
                                        "assignments": []})) == ErrorCode.illegal_generation
    assert err(client.request(SYNC, 5, {**base, **NAMED, "member_id": "ghost",
                                        "assignments": []})) == ErrorCode.unknown_member_id
    assert err(client.request(SYNC, 5, {**base, "assignments": []})) \
        == ErrorCode.inconsistent_group_protocol  # v5 without them
    assert err(client.request(SYNC, 5, {**base, "protocol_type": "consumer",
                                        "protocol_name": "roundrobin", "assignments": []})) \
        == ErrorCode.inconsistent_group_protocol
    stable_member_sync = client.request(SYNC, 3, {**base, "assignments": [
        {"member_id": joined.member_id, "assignment": b"mine"}]})
    assert err(stable_member_sync) == ErrorCode.none and stable_member_sync.assignment == b"mine"
    assert err(client.request(HEARTBEAT, 4, base)) == ErrorCode.none
    assert err(client.request(HEARTBEAT, 4, {**base, "generation_id": 0})) \
        == ErrorCode.illegal_generation
    assert err(client.request(HEARTBEAT, 4, {**base, "member_id": "ghost"})) \
        == ErrorCode.unknown_member_id
    assert err(client.request(HEARTBEAT, 0, {**base, "group_id": new_group()})) \
        == ErrorCode.unknown_member_id


def test_a_new_member_triggers_rebalance_in_progress(group_broker, client):
    group = new_group()
    first = stable_member(client, group)
    with RawClient(group_broker.host, group_broker.port) as other, \
            RawClient(group_broker.host, group_broker.port) as observer:
        marker = Marker(group_broker, observer)
        pending = other.request(JOIN, 5, join_body(group))
        other.send(JOIN, 5, join_body(group, pending.member_id))
        wait_for_state(observer, group, "PreparingRebalance")  # the join is parked
        base = {"group_id": group, "member_id": first.member_id,
                "generation_id": first.generation_id}
        assert err(client.request(HEARTBEAT, 4, base)) == ErrorCode.rebalance_in_progress
        assert err(client.request(SYNC, 5, {**base, **NAMED, "assignments": []})) \
            == ErrorCode.rebalance_in_progress
        rejoined = client.request(JOIN, 5, join_body(group, first.member_id))
        _, second = other.receive(JOIN, 5)
        assert err(rejoined) == err(second) == ErrorCode.none
        assert rejoined.generation_id == second.generation_id == first.generation_id + 1
        assert rejoined.leader == first.member_id and len(rejoined.members) == 2
        assert second.members == ()
        # The follower's SyncGroup waits for the leader's, then gets its share.
        other.send(SYNC, 5, {"group_id": group, "generation_id": second.generation_id,
                             "member_id": second.member_id, "assignments": [], **NAMED})
        marker.send(other)
        marker.wait_seen()  # the follower's SyncGroup reached the coordinator first
        assert described(observer, group).group_state == "CompletingRebalance"
        leader = client.request(SYNC, 5, {
            "group_id": group, "generation_id": rejoined.generation_id,
            "member_id": first.member_id, **NAMED, "assignments": [
                {"member_id": first.member_id, "assignment": b"1"},
                {"member_id": second.member_id, "assignment": b"2"}]})
        assert err(leader) == ErrorCode.none and leader.assignment == b"1"
        _, follower = other.receive(SYNC, 5)
        assert err(follower) == ErrorCode.none and follower.assignment == b"2"
        marker.answered(other)


def test_session_expiry_evicts_a_silent_member(group_broker, client):
    group = new_group()
    started = time.monotonic()  # the session cannot begin before the member joins
    joined = stable_member(client, group, session=300)
    with RawClient(group_broker.host, group_broker.port) as observer:
        wait_for_state(observer, group, "Empty")  # DescribeGroups is not a heartbeat
    assert time.monotonic() - started >= 0.3, "evicted before its session timeout"
    assert err(client.request(HEARTBEAT, 4, {"group_id": group, "member_id": joined.member_id,
                                             "generation_id": joined.generation_id})) \
        == ErrorCode.unknown_member_id


def test_static_membership(group_broker, client):
    group = new_group()
    first = client.request(JOIN, 5, join_body(group, instance="i-1"))
    assert err(first) == ErrorCode.none  # static members get their id at once
    client.request(SYNC, 5, {"group_id": group, "generation_id": first.generation_id,
                             "member_id": first.member_id, "group_instance_id": "i-1", **NAMED,
                             "assignments": [{"member_id": first.member_id,
                                              "assignment": b"A"}]})
    again = client.request(JOIN, 5, join_body(group, instance="i-1"))
    assert err(again) == ErrorCode.none
    assert again.generation_id == first.generation_id  # no rebalance
    fenced = {"group_id": group, "member_id": first.member_id, "group_instance_id": "i-1",
              "generation_id": first.generation_id}
    assert err(client.request(HEARTBEAT, 4, fenced)) == ErrorCode.fenced_instance_id
    left = client.request(LEAVE, 4, {"group_id": group, "members": [
        {"member_id": first.member_id, "group_instance_id": "i-1"},
        {"member_id": "", "group_instance_id": "unknown"}]})
    assert [err(m) for m in left.members] \
        == [ErrorCode.fenced_instance_id, ErrorCode.unknown_member_id]
    left = client.request(LEAVE, 4, {"group_id": group, "members": [
        {"member_id": "", "group_instance_id": "i-1"}]})
    assert err(left) == ErrorCode.none and err(left.members[0]) == ErrorCode.none


def test_leave_group_single_and_batched(client):
    group = new_group()
    one = stable_member(client, group)
    assert err(client.request(LEAVE, 0, {"group_id": group, "member_id": "ghost"})) \
        == ErrorCode.unknown_member_id
    assert err(client.request(LEAVE, 0, {"group_id": group, "member_id": one.member_id})) \
        == ErrorCode.none
    group = new_group()
    a = client.request(JOIN, 3, join_body(group))
    b_pending = client.request(JOIN, 5, join_body(group))
    left = client.request(LEAVE, 3, {"group_id": group, "members": [
        {"member_id": a.member_id}, {"member_id": b_pending.member_id}]})
    assert [err(m) for m in left.members] == [ErrorCode.none, ErrorCode.none]


def test_join_waits_for_members_until_the_rebalance_timeout(group_broker, client):
    """A member that does not rejoin is dropped when the rebalance timeout passes."""
    group = new_group()
    stuck = stable_member(client, group, rebalance=300)
    with RawClient(group_broker.host, group_broker.port) as other:
        pending = other.request(JOIN, 5, join_body(group))
        started = time.monotonic()  # the rebalance cannot begin before this join is sent
        joined = other.request(JOIN, 5, join_body(group, pending.member_id, rebalance=300))
    # Answered only when the rebalance timeout gave up on the member that did not rejoin (the
    # socket's 10 s timeout bounds the wait from above).
    assert time.monotonic() - started >= 0.3, "answered before the rebalance timeout"
    assert err(joined) == ErrorCode.none and joined.leader == joined.member_id
    assert [m.member_id for m in joined.members] == [joined.member_id]
    assert stuck.member_id != joined.member_id
    assert to_plain(joined)["generation_id"] == stuck.generation_id + 1


def test_a_connections_group_requests_are_handled_one_at_a_time(group_broker, client):
    """As on Kafka: a Heartbeat pipelined behind a parked JoinGroup is judged after the join
    completes (new generation), not against the rebalance in progress."""
    group = new_group()
    first = stable_member(client, group)
    with RawClient(group_broker.host, group_broker.port) as other, \
            RawClient(group_broker.host, group_broker.port) as observer:
        marker = Marker(group_broker, observer)
        pending = other.request(JOIN, 5, join_body(group))
        other.send(JOIN, 5, join_body(group, pending.member_id))
        other.send(HEARTBEAT, 4, {"group_id": group, "member_id": pending.member_id,
                                  "generation_id": first.generation_id})
        marker.send(other)
        marker.wait_seen()  # the broker has both the JoinGroup and the Heartbeat behind it
        assert described(observer, group).group_state == "PreparingRebalance"
        rejoined = client.request(JOIN, 5, join_body(group, first.member_id))
        _, joined = other.receive(JOIN, 5)
        _, heartbeat = other.receive(HEARTBEAT, 4)
        marker.answered(other)
        assert joined.generation_id == rejoined.generation_id == first.generation_id + 1
        assert err(heartbeat) == ErrorCode.illegal_generation
