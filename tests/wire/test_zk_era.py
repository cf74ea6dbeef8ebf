"""ZooKeeper-era inter-broker APIs: found by the codec, round-tripped, laid out as Kafka's."""

import struct

import pytest

from harness.wire import protocol, zk_era
from harness.wire.protocol import ProtocolError

LEADER_AND_ISR = {
    "controller_id": 1, "controller_epoch": 3, "broker_epoch": 4242,
    "topic_states": [{"topic_name": "orders", "partition_states": [
        {"partition_index": 0, "controller_epoch": 3, "leader": 1, "leader_epoch": 7,
         "isr": [1, 2], "zk_version": 5, "replicas": [1, 2, 3], "adding_replicas": [3],
         "removing_replicas": [], "is_new": True},
        {"partition_index": 1, "controller_epoch": 2, "leader": 2, "leader_epoch": 1,
         "isr": [2], "zk_version": 0, "replicas": [2, 1]},
    ]}],
    "live_leaders": [{"broker_id": 1, "host_name": "localhost", "port": 9092},
                     {"broker_id": 2, "host_name": "127.0.0.1", "port": 9093}],
}
UPDATE_METADATA = {
    "controller_id": 1, "controller_epoch": 3, "broker_epoch": 17,
    "topic_states": [{"topic_name": "orders", "partition_states": [
        {"partition_index": 0, "controller_epoch": 3, "leader": -1, "leader_epoch": 8,
         "isr": [], "zk_version": 6, "replicas": [1, 2], "offline_replicas": [2]}]}],
    "live_brokers": [
        {"id": 1, "endpoints": [{"port": 9092, "host": "localhost", "listener": "PLAINTEXT",
                                 "security_protocol": 0}], "rack": "r1"},
        {"id": 3, "endpoints": [], "rack": None},
    ],
}
STOP_REPLICA = {
    "controller_id": 2, "controller_epoch": 9, "broker_epoch": 30,
    "topic_states": [{"topic_name": "gone", "partition_states": [
        {"partition_index": 0, "leader_epoch": -2, "delete_partition": True},
        {"partition_index": 4, "delete_partition": False}]}],
}
CONTROLLED_SHUTDOWN = {"broker_id": 3, "broker_epoch": 99}

REQUESTS = [(4, 4, LEADER_AND_ISR), (6, 6, UPDATE_METADATA), (5, 3, STOP_REPLICA),
            (7, 3, CONTROLLED_SHUTDOWN)]
RESPONSES = [
    (4, 4, {"error_code": 0, "partition_errors": [
        {"topic_name": "orders", "partition_index": 0, "error_code": "NONE"},
        {"topic_name": "orders", "partition_index": 1, "error_code": "KAFKA_STORAGE_ERROR"}]}),
    (6, 6, {"error_code": "STALE_CONTROLLER_EPOCH"}),
    (5, 3, {"error_code": 0, "partition_errors": [
        {"topic_name": "gone", "partition_index": 0, "error_code": "FENCED_LEADER_EPOCH"}]}),
    (7, 3, {"error_code": "NONE", "remaining_partitions": [
        {"topic_name": "orders", "partition_index": 2}]}),
]


def _subset(expected, actual):
    """Every value of the plain `expected` appears in `actual` (defaults may add more)."""
    if isinstance(expected, dict):
        return all(_subset(v, actual[k]) for k, v in expected.items())
    if isinstance(expected, list):
        return len(expected) == len(actual) and all(map(_subset, expected, actual))
    if isinstance(expected, str) and isinstance(actual, int):
        return protocol.error_code(expected).value == actual
    return expected == actual


def test_the_codec_finds_exactly_the_specified_versions():
    assert [protocol.modelled_versions(k) for k in (4, 5, 6, 7)] == [(4,), (3,), (6,), (3,)]
    assert [protocol.api_name(k) for k in (4, 5, 6, 7)] == [
        "leader_and_isr", "stop_replica", "update_metadata", "controlled_shutdown"]
    assert protocol.request_class(4, 4) is zk_era.LeaderAndIsrRequest
    assert protocol.response_class(7, 3) is zk_era.ControlledShutdownResponse
    assert protocol.request_class(4, 5) is None and protocol.response_class(6, 7) is None
    assert all(protocol.is_flexible(k, v) for k, v, _ in REQUESTS)
    # Everything kio models is untouched.
    assert protocol.modelled_versions(18) == (0, 1, 2, 3, 4)


@pytest.mark.parametrize("api_key,version,body", REQUESTS, ids=lambda x: str(x)[:12])
def test_request_round_trip(api_key, version, body):
    frame = protocol.encode_request(api_key=api_key, api_version=version, correlation_id=11,
                                    client_id="controller-1", body=body)
    request = protocol.decode_request(frame[4:])
    assert (request.api_key, request.api_version, request.correlation_id) == (
        api_key, version, 11)
    assert request.client_id == "controller-1"
    assert request.api_name == protocol.api_name(api_key)
    assert request.body == protocol.build(protocol.request_class(api_key, version), body)
    assert _subset(body, protocol.to_plain(request.body))
    # Re-encoding the decoded entity gives the same bytes.
    again = protocol.encode_request(api_key=api_key, api_version=version, correlation_id=11,
                                    client_id="controller-1", body=request.body)
    assert again == frame


@pytest.mark.parametrize("api_key,version,body", RESPONSES, ids=lambda x: str(x)[:12])
def test_response_round_trip(api_key, version, body):
    frame = protocol.encode_response(api_key, version, 12, body)
    assert frame[8] == 0  # response header v1: empty tagged fields
    correlation_id, decoded = protocol.decode_response(api_key, version, frame[4:])
    assert correlation_id == 12
    assert decoded == protocol.build(protocol.response_class(api_key, version), body)
    assert _subset(body, protocol.to_plain(decoded))


def test_schema_defaults_fill_what_the_sender_leaves_out():
    body = protocol.build(zk_era.LeaderAndIsrRequest, {"controller_id": 1, "topic_states": [
        {"topic_name": "t", "partition_states": [{"partition_index": 0}]}]})
    assert body.broker_epoch == -1 and body.live_leaders == ()
    state = body.topic_states[0].partition_states[0]
    assert state.is_new is False and state.adding_replicas == () and state.isr == ()
    stop = protocol.build(zk_era.StopReplicaPartitionState, {"partition_index": 1})
    assert stop.leader_epoch == -1 and stop.delete_partition is False
    broker = protocol.build(zk_era.UpdateMetadataBroker, {"id": 1})
    assert broker.rack is None and broker.endpoints == ()


def test_controlled_shutdown_request_bytes_match_the_schema():
    frame = protocol.encode_request(api_key=7, api_version=3, correlation_id=0x0102,
                                    client_id="b3", body=CONTROLLED_SHUTDOWN)
    expected = (
        struct.pack(">hhi", 7, 3, 0x0102)   # request header v2: key, version, correlation id
        + struct.pack(">h", 2) + b"b3"      # client id: a classic (non-compact) nullable string
        + b"\x00"                           # header tagged fields
        + struct.pack(">iq", 3, 99)         # BrokerId int32, BrokerEpoch int64
        + b"\x00"                           # body tagged fields
    )
    assert frame == struct.pack(">i", len(expected)) + expected


def test_controlled_shutdown_response_bytes_match_the_schema():
    frame = protocol.encode_response(7, 3, 5, RESPONSES[3][2])
    expected = (
        struct.pack(">i", 5) + b"\x00"      # response header v1
        + struct.pack(">h", 0)              # ErrorCode
        + b"\x02"                           # compact array: 1 element (+1)
        + b"\x07orders"                     # compact string: 6 bytes (+1)
        + struct.pack(">i", 2) + b"\x00"    # PartitionIndex, element tagged fields
        + b"\x00"                           # body tagged fields
    )
    assert frame == struct.pack(">i", len(expected)) + expected


def test_update_metadata_nullable_rack_is_a_compact_nullable_string():
    body = {"controller_id": 0, "controller_epoch": 1, "topic_states": [],
            "live_brokers": [{"id": 5, "endpoints": [], "rack": None}]}
    frame = protocol.encode_request(api_key=6, api_version=6, correlation_id=1,
                                    client_id=None, body=body)
    # Tail: live_brokers (1 element) → id, empty endpoints, null rack, tags; then body tags.
    assert frame.endswith(b"\x02" + struct.pack(">i", 5) + b"\x01" + b"\x00" + b"\x00" + b"\x00")


def test_unknown_tagged_fields_from_newer_controllers_are_ignored():
    frame = protocol.encode_request(api_key=5, api_version=3, correlation_id=1,
                                    body=STOP_REPLICA)[4:]
    assert frame[-1] == 0
    tagged = frame[:-1] + bytes([1, 7, 2]) + b"hi"
    assert protocol.decode_request(tagged).body == protocol.decode_request(frame).body


def test_other_versions_of_these_apis_are_rejected():
    frame = struct.pack(">hhi", 4, 2, 1) + b"\x00\x00"
    with pytest.raises(ProtocolError, match="unsupported version 2 of leader_and_isr"):
        protocol.decode_request(frame)
    with pytest.raises(ValueError):
        protocol.encode_request(api_key=7, api_version=2, body=CONTROLLED_SHUTDOWN)
