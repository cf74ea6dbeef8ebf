"""`protocol.build` refuses keys of no version of a message and drops those of other versions."""

import pytest

from harness.wire import protocol, zk_era
from harness.wire.protocol import UnknownFieldError, build, known_fields

JOIN_GROUP, PRODUCE = 11, 0


def _join_body(**extra):
    return {"group_id": "g", "session_timeout": 10_000, "rebalance_timeout": 30_000,
            "member_id": "", "group_instance_id": "i-1", "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b"m"}], **extra}


def test_a_misspelt_top_level_key_is_refused_by_name():
    cls = protocol.request_class(JOIN_GROUP, 5)
    with pytest.raises(UnknownFieldError) as refused:
        build(cls, _join_body(memberid="m-1"))
    message = str(refused.value)
    assert "JoinGroupRequest" in message and "'memberid'" in message
    assert "member_id" in message and "group_instance_id" in message  # the known fields
    assert refused.value.keys == ["memberid"]


def test_a_misspelt_nested_key_is_refused():
    cls = protocol.response_class(PRODUCE, 9)
    with pytest.raises(UnknownFieldError, match="PartitionProduceResponse.*'erorr_code'"):
        build(cls, {"responses": [{"name": "t", "partition_responses": [
            {"index": 0, "erorr_code": 0}]}], "throttle_time": 0})


def test_a_key_of_another_version_is_dropped():
    # group_instance_id arrived in JoinGroup v5, reason in v8, node_endpoints in Produce v10.
    v3 = build(protocol.request_class(JOIN_GROUP, 3), _join_body(reason="rejoin"))
    assert not hasattr(v3, "group_instance_id") and v3.member_id == ""
    v8 = build(protocol.request_class(JOIN_GROUP, 8), _join_body(reason="rejoin"))
    assert (v8.group_instance_id, v8.reason) == ("i-1", "rejoin")
    produce = build(protocol.response_class(PRODUCE, 9),
                    {"responses": [], "throttle_time": 0, "node_endpoints": []})
    assert produce.responses == ()


def test_known_fields_are_the_union_over_versions_per_entity_name():
    assert {"group_instance_id", "reason", "rebalance_timeout"} \
        <= known_fields(protocol.request_class(JOIN_GROUP, 0))
    assert known_fields(protocol.response_class(PRODUCE, 3)) \
        == {"responses", "throttle_time", "node_endpoints"}


@pytest.mark.parametrize("version", protocol.modelled_versions(JOIN_GROUP))
def test_one_body_still_encodes_every_version(version):
    frame = protocol.encode_request(api_key=JOIN_GROUP, api_version=version, body=_join_body())
    request = protocol.decode_request(frame[4:])
    assert request.body.group_id == "g" and request.body.protocols[0].name == "range"


def test_zk_era_entities_know_their_own_fields():
    assert known_fields(zk_era.StopReplicaPartitionState) \
        == {"partition_index", "leader_epoch", "delete_partition"}
    build(zk_era.StopReplicaPartitionState, {"partition_index": 1, "delete_partition": True})
    with pytest.raises(UnknownFieldError, match="'delete'"):
        build(zk_era.StopReplicaPartitionState, {"partition_index": 1, "delete": True})


def test_entities_that_are_already_built_pass_through():
    cls = protocol.request_class(JOIN_GROUP, 5)
    built = build(cls, _join_body())
    assert build(cls, built) is built and build(cls, None) is None
