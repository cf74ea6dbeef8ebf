"""OffsetCommit / OffsetFetch / OffsetDelete and group administration through raw requests."""

import uuid

from confluent_kafka.admin import AdminClient, NewTopic

from harness.cluster.peers import ReferenceBroker
from harness.raw_client import RawClient
from harness.waiting import wait_for
from harness.wire.errors import ErrorCode
from harness.wire.group_records import encode_subscription
from tests.broker.conftest import GROUP_PROPERTIES, create_topic
from tests.broker.test_group_protocol import (
    HEARTBEAT,
    JOIN,
    client,  # noqa: F401  (fixture)
    err,
    join_body,
    new_group,
    stable_member,
)

COMMIT, FETCH, DESCRIBE, LIST, DELETE_GROUPS, OFFSET_DELETE = 8, 9, 15, 16, 42, 47


def commit_body(group, topic, offsets, generation=-1, member_id="", metadata=None):
    return {"group_id": group, "generation_id_or_member_epoch": generation,
            "member_id": member_id, "retention_time": -1,
            "topics": [{"name": topic, "partitions": [
                {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
                 "committed_metadata": metadata} for p, o in offsets.items()]}]}


def partition_errors(response):
    return [err(p) for t in response.topics for p in t.partitions]


def test_simple_consumer_commit_and_fetch(group_broker, client):  # noqa: F811
    topic = create_topic(group_broker.bootstrap, partitions=2)
    group = new_group()
    response = client.request(COMMIT, 8, commit_body(group, topic, {0: 5, 1: 7}, metadata="m"))
    assert partition_errors(response) == [ErrorCode.none, ErrorCode.none]
    fetched = client.request(FETCH, 7, {"group_id": group, "require_stable": True,
                                        "topics": [{"name": topic, "partition_indexes": [0, 1]}]})
    assert [(p.committed_offset, p.metadata) for p in fetched.topics[0].partitions] \
        == [(5, "m"), (7, "m")]
    everything = client.request(FETCH, 7, {"group_id": group, "topics": None})
    assert [p.partition_index for t in everything.topics for p in t.partitions] == [0, 1]
    other = new_group()
    multi = client.request(FETCH, 8, {"groups": [
        {"group_id": group, "topics": [{"name": topic, "partition_indexes": [1]}]},
        {"group_id": other, "topics": [{"name": topic, "partition_indexes": [0]}]}]})
    assert [(g.group_id, g.topics[0].partitions[0].committed_offset) for g in multi.groups] \
        == [(group, 7), (other, -1)]
    legacy = client.request(FETCH, 1, {"group_id": group,
                                       "topics": [{"name": topic, "partition_indexes": [0]}]})
    assert legacy.topics[0].partitions[0].committed_offset == 5


def test_commit_errors(group_broker, client):  # noqa: F811
    topic = create_topic(group_broker.bootstrap)
    group = new_group()
    too_large = client.request(COMMIT, 8, commit_body(group, topic, {0: 1}, metadata="x" * 65))
    assert partition_errors(too_large) == [ErrorCode.offset_metadata_too_large]
    unknown = client.request(COMMIT, 8, commit_body(group, "no-such-topic", {0: 1}))
    assert partition_errors(unknown) == [ErrorCode.unknown_topic_or_partition]
    member = stable_member(client, group)
    gen = member.generation_id
    cases = [
        (commit_body(group, topic, {0: 1}), ErrorCode.unknown_member_id),
        (commit_body(group, topic, {0: 1}, gen + 5, member.member_id),
         ErrorCode.illegal_generation),
        (commit_body(group, topic, {0: 1}, gen, "ghost"), ErrorCode.unknown_member_id),
        (commit_body(group, topic, {0: 3}, gen, member.member_id), ErrorCode.none),
        (commit_body(new_group(), topic, {0: 1}, 4, "m"), ErrorCode.illegal_generation),
    ]
    assert [partition_errors(client.request(COMMIT, 8, body))[0] for body, _ in cases] \
        == [expected for _, expected in cases]
    # A second member makes the group rebalance; once the join completes (CompletingRebalance)
    # commits are refused until the assignment is synced.
    pending = client.request(JOIN, 5, join_body(group))
    client.send(JOIN, 5, join_body(group, pending.member_id))
    with RawClient(group_broker.host, group_broker.port) as leader:
        leader.request(JOIN, 5, join_body(group, member.member_id))
        client.receive(JOIN, 5)
        completing = leader.request(COMMIT, 8, commit_body(group, topic, {0: 4}, gen + 1,
                                                           member.member_id))
        assert partition_errors(completing) == [ErrorCode.rebalance_in_progress]


def test_describe_list_delete_groups(group_broker, client):  # noqa: F811
    topic = create_topic(group_broker.bootstrap)
    active = new_group()
    member = stable_member(client, active)
    simple = new_group()
    client.request(COMMIT, 8, commit_body(simple, topic, {0: 1}))
    described = client.request(DESCRIBE, 5, {"groups": [active, simple, "never-seen"],
                                             "include_authorized_operations": False})
    by_id = {g.group_id: g for g in described.groups}
    assert (by_id[active].group_state, by_id[active].protocol_data) == ("Stable", "range")
    assert [(m.member_id, m.member_assignment) for m in by_id[active].members] \
        == [(member.member_id, b"A")]
    assert by_id[simple].group_state == "Empty" and by_id[simple].members == ()
    assert by_id["never-seen"].group_state == "Dead" and err(by_id["never-seen"]) == ErrorCode.none
    listed = client.request(LIST, 4, {"states_filter": ["Stable"]})
    ids = {g.group_id: g.group_state for g in listed.groups}
    assert ids.get(active) == "Stable" and simple not in ids
    everything = client.request(LIST, 5, {"states_filter": [], "types_filter": []})
    assert {active, simple} <= {g.group_id for g in everything.groups}
    deleted = client.request(DELETE_GROUPS, 2, {"groups_names": [active, simple, new_group()]})
    assert [err(r) for r in deleted.results] \
        == [ErrorCode.non_empty_group, ErrorCode.none, ErrorCode.group_id_not_found]
    fetched = client.request(FETCH, 7, {"group_id": simple, "topics": None})
    assert fetched.topics == ()


def test_offset_delete(group_broker, client):  # noqa: F811
    topic = create_topic(group_broker.bootstrap, partitions=2)
    subscribed = stable_member(client, group := new_group(),
                               protocols=(("range", _subscription(topic)),))
    client.request(COMMIT, 8, commit_body(group, topic, {0: 1, 1: 2}, subscribed.generation_id,
                                          subscribed.member_id))
    body = {"group_id": group, "topics": [{"name": topic, "partitions": [
        {"partition_index": 0}]}]}
    refused = client.request(OFFSET_DELETE, 0, body)
    assert err(refused) == ErrorCode.none
    assert partition_errors(refused) == [ErrorCode.group_subscribed_to_topic]
    simple = new_group()
    client.request(COMMIT, 8, commit_body(simple, topic, {0: 1, 1: 2}))
    done = client.request(OFFSET_DELETE, 0, {**body, "group_id": simple})
    assert partition_errors(done) == [ErrorCode.none]
    left = client.request(FETCH, 7, {"group_id": simple, "topics": None})
    assert [p.partition_index for t in left.topics for p in t.partitions] == [1]
    assert err(client.request(OFFSET_DELETE, 0, {**body, "group_id": new_group()})) \
        == ErrorCode.group_id_not_found


def test_a_deleted_topic_leaves_no_committed_offset_for_its_re_creation(group_broker,
                                                                       client):  # noqa: F811
    """DeleteTopics on a single broker removes the topic's offsets from every group at once
    (Kafka's GroupCoordinator.onPartitionsDeleted), so the same name created again starts with
    no committed offset; another topic's offset in the same group stays."""
    topic, other = (create_topic(group_broker.bootstrap) for _ in range(2))
    group = new_group()
    for name in (topic, other):
        assert partition_errors(client.request(COMMIT, 8, commit_body(group, name, {0: 2}))) \
            == [ErrorCode.none]
    admin = AdminClient({"bootstrap.servers": group_broker.bootstrap})
    admin.delete_topics([topic])[topic].result(timeout=10)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=10)

    def committed(name):
        fetched = client.request(FETCH, 7, {"group_id": group, "topics": [
            {"name": name, "partition_indexes": [0]}]})
        return fetched.topics[0].partitions[0].committed_offset

    assert (committed(topic), committed(other)) == (-1, 2)


def _subscription(topic):
    return encode_subscription([topic])


def test_coordinator_load_in_progress_is_observable(tmp_path):
    group = f"g-{uuid.uuid4().hex[:6]}"
    props = {"group.coordinator.load.delay.ms": 1500, "offsets.topic.num.partitions": 3,
             "group.initial.rebalance.delay.ms": 0}
    with ReferenceBroker(tmp_path / "b", properties=props) as running, \
            RawClient(running.host, running.port) as raw:
        assert err(raw.request(JOIN, 5, join_body(group))) == ErrorCode.not_coordinator
        assert err(raw.request(10, 3, {"key": group, "key_type": 0})) == ErrorCode.none
        errors = [err(raw.request(JOIN, 5, join_body(group))),
                  err(raw.request(HEARTBEAT, 4, {"group_id": group, "member_id": "m",
                                                 "generation_id": 1})),
                  err(raw.request(FETCH, 7, {"group_id": group, "topics": None})),
                  err(raw.request(LIST, 4, {}))]
        assert errors == [ErrorCode.coordinator_load_in_progress] * 4
        wait_for(lambda: err(raw.request(JOIN, 5, join_body(group)))
                 == ErrorCode.member_id_required, 10, "the coordinator to finish loading",
                 retry_on=())
        assert "Finished loading" in running.log_path.read_text()


def test_offsets_topic_needs_enough_brokers(tmp_path):
    with ReferenceBroker(tmp_path / "b",
                         properties={"offsets.topic.replication.factor": 3}) as running, \
            RawClient(running.host, running.port) as raw:
        assert err(raw.request(10, 3, {"key": "g", "key_type": 0})) \
            == ErrorCode.coordinator_not_available


def test_group_membership_and_offsets_are_replayed_after_a_restart(tmp_path):
    broker = ReferenceBroker(tmp_path / "b", properties=GROUP_PROPERTIES)
    broker.start()
    try:
        topic = create_topic(broker.bootstrap)
        group = new_group()
        with RawClient(broker.host, broker.port) as raw:
            raw.request(10, 3, {"key": group, "key_type": 0})
            member = stable_member(raw, group, session=30_000)
            raw.request(COMMIT, 8, commit_body(group, topic, {0: 42}, member.generation_id,
                                               member.member_id, metadata="before restart"))
        broker.stop()
        broker.start()
        with RawClient(broker.host, broker.port) as raw:
            raw.request(10, 3, {"key": group, "key_type": 0})
            beat = {"group_id": group, "member_id": member.member_id,
                    "generation_id": member.generation_id}

            def loaded() -> tuple[ErrorCode] | None:  # a tuple: NONE is a falsy 0
                answer = err(raw.request(HEARTBEAT, 4, beat))
                return None if answer == ErrorCode.coordinator_load_in_progress else (answer,)

            (answered,) = wait_for(loaded, 10, "the restarted coordinator to finish loading",
                                   interval=0.05, retry_on=())
            assert answered == ErrorCode.none
            described = raw.request(DESCRIBE, 5, {"groups": [group]}).groups[0]
            assert (described.group_state, described.members[0].member_assignment) \
                == ("Stable", b"A")
            fetched = raw.request(FETCH, 7, {"group_id": group, "topics": [
                {"name": topic, "partition_indexes": [0]}]})
            partition = fetched.topics[0].partitions[0]
            assert (partition.committed_offset, partition.metadata) == (42, "before restart")
    finally:
        broker.stop()
