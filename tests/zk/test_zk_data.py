"""Every znode's exact bytes as Kafka writes them, and decoding what older Kafkas wrote."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reference_broker.log.topic_partition import TopicPartition
from reference_broker.zk.admin_znodes import (
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityZNode,
    DeleteTopicsTopicZNode,
    IsrChangeNotificationSequenceZNode,
    PreferredReplicaElectionZNode,
    ReassignPartitionsZNode,
)
from reference_broker.zk.broker_znodes import (
    BrokerIdZNode,
    BrokerInfo,
    ClusterIdZNode,
    ControllerEpochZNode,
    ControllerZNode,
    EndPoint,
)
from reference_broker.zk.kafka_zk_client import PERSISTENT_PATHS
from reference_broker.zk.topic_znodes import (
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicAssignment,
    TopicPartitionStateZNode,
    TopicZNode,
)
from reference_broker.zk.zk_json import ZkDataError, is_base64_uuid, uuid_to_base64

TP = TopicPartition("orders", 3)


def test_paths_are_kafkas() -> None:
    assert BrokerIdZNode.path(2) == "/brokers/ids/2"
    assert TopicZNode.path("orders") == "/brokers/topics/orders"
    assert TopicPartitionStateZNode.path(TP) == "/brokers/topics/orders/partitions/3/state"
    assert ControllerZNode.path() == "/controller"
    assert ControllerEpochZNode.path() == "/controller_epoch"
    assert ClusterIdZNode.path() == "/cluster/id"
    assert ConfigEntityZNode.path("topics", "orders") == "/config/topics/orders"
    assert DeleteTopicsTopicZNode.path("orders") == "/admin/delete_topics/orders"
    assert ReassignPartitionsZNode.path() == "/admin/reassign_partitions"
    assert PreferredReplicaElectionZNode.path() == "/admin/preferred_replica_election"
    assert IsrChangeNotificationSequenceZNode.path() == "/isr_change_notification/isr_change_"
    assert IsrChangeNotificationSequenceZNode.path("0000000004") == (
        "/isr_change_notification/isr_change_0000000004"
    )
    assert ConfigEntityChangeNotificationSequenceZNode.path() == "/config/changes/config_change_"
    assert "/brokers/ids" in PERSISTENT_PATHS and "/isr_change_notification" in PERSISTENT_PATHS


def test_broker_registration_is_kafkas_version_5_document() -> None:
    info = BrokerInfo(1, (EndPoint("PLAINTEXT", "127.0.0.1", 9092),), timestamp_ms=1700000000123)
    assert json.loads(BrokerIdZNode.encode(info)) == {
        "features": {},
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
        "endpoints": ["PLAINTEXT://127.0.0.1:9092"],
        "jmx_port": -1,
        "port": 9092,
        "host": "127.0.0.1",
        "version": 5,
        "timestamp": "1700000000123",
    }


def test_broker_registration_round_trips_listeners_and_rack() -> None:
    info = BrokerInfo(
        7,
        (EndPoint("INTERNAL", "10.0.0.7", 29092, "SSL"), EndPoint("CLIENT", "::1", 9092)),
        rack="r1",
        timestamp_ms=42,
    )
    data = BrokerIdZNode.encode(info)
    document = json.loads(data)
    assert document["endpoints"] == ["INTERNAL://10.0.0.7:29092", "CLIENT://[::1]:9092"]
    assert document["listener_security_protocol_map"] == {"INTERNAL": "SSL", "CLIENT": "PLAINTEXT"}
    assert document["rack"] == "r1"
    assert (document["host"], document["port"]) == ("::1", 9092)
    assert BrokerIdZNode.decode(7, data) == info


def test_broker_registration_without_plaintext_has_null_host() -> None:
    info = BrokerInfo(1, (EndPoint("SSL", "h", 9093, "SSL"),))
    document = json.loads(BrokerIdZNode.encode(info))
    assert (document["host"], document["port"]) == (None, -1)
    assert "rack" not in document


def test_broker_registration_decodes_older_versions() -> None:
    v1 = b'{"version":1,"host":"h","port":9092,"jmx_port":9999,"timestamp":"5"}'
    assert BrokerIdZNode.decode(3, v1).endpoints == (EndPoint("PLAINTEXT", "h", 9092),)
    v4 = (b'{"version":4,"host":"h","port":9092,"jmx_port":-1,"timestamp":"5",'
          b'"endpoints":["PLAINTEXT://h:9092"],"rack":"/default-rack"}')
    decoded = BrokerIdZNode.decode(3, v4)
    assert decoded.rack == "/default-rack" and decoded.version == 4


@pytest.mark.parametrize("data, message", [
    (b"not json", "not JSON"),
    (b"[1]", "expected a JSON object"),
    (b'{"version":5,"jmx_port":"x","endpoints":[]}', "'jmx_port' must be an integer"),
    (b'{"version":5,"jmx_port":-1,"endpoints":["nonsense"]}', "not NAME://host:port"),
    (b'{"version":5,"jmx_port":-1,"endpoints":["CUSTOM://h:1"]}', "no security protocol"),
])
def test_bad_broker_registration_names_the_znode_and_field(data: bytes, message: str) -> None:
    with pytest.raises(ZkDataError, match=message) as excinfo:
        BrokerIdZNode.decode(4, data)
    assert "/brokers/ids/4" in str(excinfo.value)


def test_cluster_id_document_has_string_version() -> None:
    cluster_id = uuid_to_base64(bytes(range(16)))
    assert len(cluster_id) == 22 and is_base64_uuid(cluster_id)
    data = ClusterIdZNode.encode(cluster_id)
    assert data == b'{"version":"1","id":"' + cluster_id.encode() + b'"}'
    assert ClusterIdZNode.decode(data) == cluster_id


def test_uuid_text_is_url_safe_and_checked() -> None:
    assert uuid_to_base64(b"\xff" * 16) == "_____________________w"
    assert not is_base64_uuid("short")
    with pytest.raises(ValueError, match="16 bytes"):
        uuid_to_base64(b"x")


def test_topic_assignment_document() -> None:
    assignment = TopicAssignment(
        {1: ReplicaAssignment((2, 3, 1)), 0: ReplicaAssignment((1, 2, 3), (4,), (3,))},
        topic_id="ZOLr9CLNQjSW70hyIHx6BQ",
    )
    data = TopicZNode.encode(assignment)
    assert json.loads(data) == {
        "removing_replicas": {"0": [3]},
        "partitions": {"0": [1, 2, 3], "1": [2, 3, 1]},
        "adding_replicas": {"0": [4]},
        "version": 3,
        "topic_id": "ZOLr9CLNQjSW70hyIHx6BQ",
    }
    assert TopicZNode.decode("t", data) == assignment


def test_topic_assignment_decodes_version_1_without_reassignment_fields() -> None:
    decoded = TopicZNode.decode("t", b'{"version":1,"partitions":{"1":[101,103],"0":[103,102]}}')
    assert decoded == TopicAssignment.of({0: [103, 102], 1: [101, 103]})
    assert decoded.replicas() == {0: [103, 102], 1: [101, 103]}
    assert "topic_id" not in json.loads(TopicZNode.encode(decoded))


def test_topic_assignment_rejects_a_bad_topic_id() -> None:
    with pytest.raises(ZkDataError, match="topic_id"):
        TopicZNode.decode("t", b'{"version":3,"partitions":{},"topic_id":"nope"}')


def test_partition_state_document() -> None:
    state = LeaderIsrAndControllerEpoch(leader=2, leader_epoch=8, isr=(2, 3), controller_epoch=33)
    data = TopicPartitionStateZNode.encode(state)
    assert data == b'{"controller_epoch":33,"leader":2,"version":1,"leader_epoch":8,"isr":[2,3]}'
    assert TopicPartitionStateZNode.decode(TP, data) == state


def test_partition_state_writes_recovery_state_only_when_recovering() -> None:
    state = LeaderIsrAndControllerEpoch(-1, 3, (1,), 2, leader_recovery_state=1)
    data = TopicPartitionStateZNode.encode(state)
    assert json.loads(data)["leader_recovery_state"] == 1
    assert TopicPartitionStateZNode.decode(TP, data) == state


def test_partition_state_rejects_booleans_as_ids() -> None:
    with pytest.raises(ZkDataError, match="'isr' must be a list of integers"):
        TopicPartitionStateZNode.decode(
            TP, b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[true]}'
        )


def test_controller_document_is_version_2() -> None:
    data = ControllerZNode.encode(2, 1688524276281)
    assert data == (
        b'{"version":2,"brokerid":2,"timestamp":"1688524276281","kraftControllerEpoch":-1}'
    )
    assert ControllerZNode.decode(data) == 2
    assert ControllerZNode.decode(b'{"version":1,"brokerid":101,"timestamp":"1"}') == 101


def test_controller_epoch_is_plain_text() -> None:
    assert ControllerEpochZNode.encode(12) == b"12"
    assert ControllerEpochZNode.decode(b"12") == 12
    with pytest.raises(ZkDataError, match="/controller_epoch"):
        ControllerEpochZNode.decode(b"{}")


def test_topic_config_document() -> None:
    data = ConfigEntityZNode.encode({"unclean.leader.election.enable": "true"})
    assert data == b'{"version":1,"config":{"unclean.leader.election.enable":"true"}}'
    assert ConfigEntityZNode.decode(data) == {"unclean.leader.election.enable": "true"}
    assert ConfigEntityZNode.decode(b"") == {}
    with pytest.raises(ZkDataError, match="must be a string"):
        ConfigEntityZNode.decode(b'{"version":1,"config":{"retention.ms":5}}')


def test_config_change_notification_document() -> None:
    data = ConfigEntityChangeNotificationSequenceZNode.encode("topics", "orders")
    assert data == b'{"version":2,"entity_path":"topics/orders"}'
    assert ConfigEntityChangeNotificationSequenceZNode.decode(data) == ("topics", "orders")


def test_reassignment_document() -> None:
    request = {TopicPartition("b", 0): [3, 1], TopicPartition("a", 1): [1, 2]}
    data = ReassignPartitionsZNode.encode(request)
    assert json.loads(data) == {"version": 1, "partitions": [
        {"topic": "a", "partition": 1, "replicas": [1, 2]},
        {"topic": "b", "partition": 0, "replicas": [3, 1]},
    ]}
    assert ReassignPartitionsZNode.decode(data) == {tp: tuple(r) for tp, r in request.items()}


@pytest.mark.parametrize(
    "znode", [PreferredReplicaElectionZNode, IsrChangeNotificationSequenceZNode]
)
def test_partition_list_documents(znode: type) -> None:
    partitions = {TopicPartition("b", 0), TopicPartition("a", 2)}
    data = znode.encode(partitions)
    assert json.loads(data) == {"version": 1, "partitions": [
        {"topic": "a", "partition": 2}, {"topic": "b", "partition": 0},
    ]}
    assert znode.decode(data) == partitions


def test_isr_change_sequence_number_from_name_or_path() -> None:
    seq = IsrChangeNotificationSequenceZNode.sequence_number
    assert seq("isr_change_0000000007") == "0000000007"
    assert seq("/isr_change_notification/isr_change_0000000012") == "0000000012"


_ids = st.integers(min_value=-1, max_value=2**31 - 1)


@given(
    leader=_ids,
    leader_epoch=st.integers(min_value=0, max_value=2**31 - 1),
    isr=st.lists(_ids, max_size=6),
    controller_epoch=st.integers(min_value=0, max_value=2**31 - 1),
)
def test_partition_state_round_trips(leader: int, leader_epoch: int, isr: list[int],
                                     controller_epoch: int) -> None:
    state = LeaderIsrAndControllerEpoch(leader, leader_epoch, tuple(isr), controller_epoch)
    assert TopicPartitionStateZNode.decode(TP, TopicPartitionStateZNode.encode(state)) == state


@given(st.dictionaries(
    st.integers(min_value=0, max_value=1000), st.lists(_ids, min_size=1, max_size=5), max_size=8,
))
def test_topic_assignment_round_trips(replicas: dict[int, list[int]]) -> None:
    assignment = TopicAssignment.of(replicas)
    assert TopicZNode.decode("t", TopicZNode.encode(assignment)) == assignment
