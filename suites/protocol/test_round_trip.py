"""Every API the target advertises, at every advertised version harness.wire can encode.

The test is parametrized by API (the ones this module knows a safe request for: read-only,
validate-only, or acting on the test's own unique topic or group); the versions come from the
target's ApiVersions at run time, so a target is only held to what it claims. An API the target
does not advertise is skipped with that reason.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, fields, is_dataclass
from typing import Any

import pytest

from harness.raw_client import RawClient
from harness.wire import protocol
from harness.wire.records import build_batch
from suites.protocol._wire import (
    API_VERSIONS_BODY,
    ZERO_UUID,
    Wire,
    encodable_versions,
    fetch_body,
    list_offsets_body,
    produce_body,
)
from suites.support import unique_name

GROUP_ID_NOT_FOUND, UNKNOWN_MEMBER_ID = 69, 25
# A member of a group that does not exist: Kafka's classic coordinator answers UNKNOWN_MEMBER_ID,
# its KIP-848 rewrite may answer GROUP_ID_NOT_FOUND; both say "no such membership".
NO_MEMBERSHIP = (UNKNOWN_MEMBER_ID, GROUP_ID_NOT_FOUND)
ANY_FILTER = 1  # ResourceType/PatternType/AclOperation/AclPermissionType "ANY"
TOPIC_RESOURCE = 2


@dataclass(frozen=True)
class Names:
    """What one request may act on: the test's own topic and group, and a name no topic has
    (one per version, so a version that creates it does not change the next one's answer)."""

    topic: str
    topic_id: uuid.UUID
    group: str
    fresh: str


@dataclass(frozen=True)
class Sample:
    """A safe request for an API: where it goes, its body, and the error codes it may get."""

    route: str  # "any", "leader", "coordinator" or "controller"
    body: Callable[[Names], dict[str, Any]]
    errors: frozenset[int] = frozenset({0})


def _ok(route: str, body: Callable[[Names], dict[str, Any]], *errors: int) -> Sample:
    return Sample(route, body, frozenset(errors or (0,)))


SAMPLES: dict[int, Sample] = {
    0: _ok("leader", lambda n: produce_body(
        n.topic, build_batch([(b"k", b"round-trip")]), topic_id=n.topic_id)),
    1: _ok("leader", lambda n: fetch_body(n.topic, 0, topic_id=n.topic_id)),
    2: _ok("leader", lambda n: list_offsets_body(n.topic, -1)),
    3: _ok("any", lambda n: {"topics": [{"name": n.topic, "topic_id": ZERO_UUID}],
                             "allow_auto_topic_creation": False}),
    8: _ok("coordinator", lambda n: {
        "group_id": n.group, "generation_id_or_member_epoch": -1, "member_id": "",
        "retention_time": -1, "topics": [{"name": n.topic, "topic_id": n.topic_id, "partitions": [
            {"partition_index": 0, "committed_offset": 0, "committed_leader_epoch": -1,
             "committed_metadata": "round-trip"}]}]}),
    9: _ok("coordinator", lambda n: {
        "group_id": n.group, "require_stable": False,
        "topics": [{"name": n.topic, "partition_indexes": [0]}],
        "groups": [{"group_id": n.group, "member_id": None, "member_epoch": -1, "topics": [
            {"name": n.topic, "topic_id": n.topic_id, "partition_indexes": [0]}]}]}),
    10: _ok("any", lambda n: {"key": n.group, "key_type": 0, "coordinator_keys": [n.group]},
            0, 15),
    11: _ok("coordinator", lambda n: {
        "group_id": n.group, "session_timeout": 10_000, "rebalance_timeout": 10_000,
        "member_id": "harness-unknown-member", "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}]}, *NO_MEMBERSHIP),
    12: _ok("coordinator", lambda n: {"group_id": n.group, "generation_id": 1,
                                      "member_id": "harness-unknown-member"}, *NO_MEMBERSHIP),
    13: _ok("coordinator", lambda n: {"group_id": n.group, "member_id": "harness-unknown-member",
                                      "members": [{"member_id": "harness-unknown-member"}]},
            0, *NO_MEMBERSHIP),
    # From v5 (KIP-559) a SyncGroup names its protocol type and name, as clients send them.
    14: _ok("coordinator", lambda n: {"group_id": n.group, "generation_id": 1,
                                      "member_id": "harness-unknown-member", "assignments": [],
                                      "protocol_type": "consumer", "protocol_name": "range"},
            *NO_MEMBERSHIP),
    # KIP-1043: DescribeGroups v6 names a group that does not exist GROUP_ID_NOT_FOUND.
    15: _ok("coordinator", lambda n: {"groups": [n.group], "include_authorized_operations": False},
            0, GROUP_ID_NOT_FOUND),
    16: _ok("any", lambda n: {"states_filter": [], "types_filter": []}),
    18: _ok("any", lambda n: API_VERSIONS_BODY),
    19: _ok("controller", lambda n: {
        "topics": [{"name": n.fresh, "num_partitions": 1, "replication_factor": 1,
                    "assignments": [], "configs": []}], "timeout": 10_000,
        "validate_only": True}),
    20: _ok("controller", lambda n: {"topic_names": [n.fresh], "timeout": 10_000, "topics": [
        {"name": n.fresh, "topic_id": ZERO_UUID}]}, 3),
    21: _ok("leader", lambda n: {"topics": [{"name": n.topic, "partitions": [
        {"partition_index": 0, "offset": 0}]}], "timeout": 10_000}),
    22: _ok("any", lambda n: {"transactional_id": None, "transaction_timeout": 60_000,
                              "producer_id": -1, "producer_epoch": -1}),
    23: _ok("leader", lambda n: {"replica_id": -1, "topics": [{"topic": n.topic, "partitions": [
        {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]}),
    29: _ok("any", lambda n: {
        "resource_type_filter": ANY_FILTER, "resource_name_filter": None,
        "pattern_type_filter": ANY_FILTER, "principal_filter": None, "host_filter": None,
        "operation": ANY_FILTER, "permission_type": ANY_FILTER}, 0, 54),
    32: _ok("any", lambda n: {"resources": [
        {"resource_type": TOPIC_RESOURCE, "resource_name": n.topic, "configuration_keys": None}],
        "include_synonyms": False, "include_documentation": False}),
    37: _ok("controller", lambda n: {"topics": [{"name": n.topic, "count": 2,
                                                 "assignments": None}],
                                     "timeout": 10_000, "validate_only": True}),
    42: _ok("coordinator", lambda n: {"groups_names": [n.group]}, GROUP_ID_NOT_FOUND),
    43: _ok("controller", lambda n: {"election_type": 0, "timeout": 10_000, "topic_partitions": [
        {"topic": n.topic, "partitions": [0]}]}, 0, 84),
    44: _ok("controller", lambda n: {"validate_only": True, "resources": [
        {"resource_type": TOPIC_RESOURCE, "resource_name": n.topic, "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": "86400000"}]}]}),
    46: _ok("controller", lambda n: {"timeout": 10_000, "topics": None}),
    47: _ok("coordinator", lambda n: {"group_id": n.group, "topics": [
        {"name": n.topic, "partitions": [{"partition_index": 0}]}]}, GROUP_ID_NOT_FOUND),
    48: _ok("any", lambda n: {"components": [], "strict": False}),
    60: _ok("any", lambda n: {"include_cluster_authorized_operations": False,
                              "endpoint_type": 1, "include_fenced_brokers": False}),
    61: _ok("leader", lambda n: {"topics": [{"name": n.topic, "partition_indexes": [0]}]}),
    66: _ok("any", lambda n: {"state_filters": [], "producer_id_filters": []}),
    69: _ok("coordinator", lambda n: {"group_ids": [n.group],
                                      "include_authorized_operations": False},
            0, GROUP_ID_NOT_FOUND),
    75: _ok("any", lambda n: {"topics": [{"name": n.topic}], "response_partition_limit": 100,
                              "cursor": None}),
}


def _route(wire: Wire, sample: Sample, names: Names) -> RawClient:
    if sample.route == "leader":
        return wire.leader(names.topic)
    if sample.route == "coordinator":
        return wire.coordinator(names.group)
    if sample.route == "controller":
        return wire.controller()
    return wire.bootstrap


def _error_codes(value: Any) -> set[int]:
    """Every error code anywhere in a decoded response (top level and per item)."""
    found: set[int] = set()
    if is_dataclass(value) and not isinstance(value, type):
        for f in fields(value):
            item = getattr(value, f.name)
            if f.name == "error_code":
                found.add(int(item.value))
            found |= _error_codes(item)
    elif isinstance(value, tuple):
        for item in value:
            found |= _error_codes(item)
    return found


def _problems(api_key: int, version: int, frame: bytes, sample: Sample,
              correlation: int) -> list[str]:
    """What is wrong with one response frame (empty when it is sane)."""
    try:
        got, body = protocol.decode_response(api_key, version, frame)
    except Exception as exc:  # any decoding failure is the finding itself
        return [f"v{version}: undecodable response: {type(exc).__name__}: {exc}"]
    problems = []
    if got != correlation:
        problems.append(f"v{version}: correlation id {got}, sent {correlation}")
    unexpected = _error_codes(body) - sample.errors
    if unexpected:
        names = sorted(protocol.error_name(code) for code in unexpected)
        problems.append(f"v{version}: unexpected errors {names}")
    throttle = getattr(body, "throttle_time", None)
    if throttle is not None and throttle.total_seconds() < 0:
        problems.append(f"v{version}: negative throttle time {throttle}")
    # Re-encoded, the decoded body must account for the whole frame: more bytes mean fields of
    # another version. Flexible versions may also carry tagged fields that kio leaves out when
    # they hold their default, so there the frame may only be longer, never shorter.
    reencoded = len(protocol.encode_response(api_key, version, got, body)) - 4
    flexible = protocol.is_flexible(api_key, version)
    if reencoded > len(frame) or (reencoded < len(frame) and not flexible):
        problems.append(f"v{version}: response is {len(frame)} bytes but its decoded content "
                        f"is {reencoded} (fields of another version?)")
    return problems


@pytest.mark.parametrize("api_key", sorted(SAMPLES), ids=protocol.api_name)
def test_advertised_versions_round_trip(request: pytest.FixtureRequest, wire: Wire,
                                        new_topic: Callable[..., str], api_key: int) -> None:
    """Every advertised version of an API is answered with a well-formed response of that version [protocol guide, ApiVersions; KIP-35].

    Each version's request is encoded at exactly that version; its response must decode at
    that version with nothing left over, echo the correlation id, and carry only the error
    codes a valid request of this kind may get.
    """  # noqa: E501
    versions = encodable_versions(wire.advertised, api_key)
    if not versions:
        pytest.skip(f"{protocol.api_name(api_key)} is not advertised at any version harness.wire"
                    f" encodes (advertised: {wire.advertised.get(api_key)})")
    sample = SAMPLES[api_key]
    topic = new_topic(1, exact=False)
    topic_id = wire.topic_id(topic)
    group, unused = unique_name(request, "group-"), unique_name(request, "unused-")
    client = _route(wire, sample, Names(topic, topic_id, group, unused))
    problems = []
    for version in versions:
        names = Names(topic, topic_id, group, f"{unused}-v{version}")
        correlation = client.send(api_key, version, sample.body(names))
        try:
            frame = client.receive_frame()
        except (ConnectionError, TimeoutError) as exc:
            problems.append(f"v{version}: no answer ({type(exc).__name__}: {exc})")
            break
        problems += _problems(api_key, version, frame, sample, correlation)
    assert not problems, "\n".join(problems)


INCONSISTENT_GROUP_PROTOCOL = 23
SYNC_GROUP = 14


def test_sync_group_v5_without_protocol_type_or_name_is_inconsistent(
        request: pytest.FixtureRequest, wire: Wire) -> None:
    """A SyncGroup v5+ whose protocol type or name is null is refused with INCONSISTENT_GROUP_PROTOCOL [KIP-559].

    From v5 both fields are mandatory; Apache Kafka 3.9 answers a null one before it looks at the
    group or the member at all.
    """  # noqa: E501
    if max(encodable_versions(wire.advertised, SYNC_GROUP), default=-1) < 5:
        pytest.skip("the target advertises no SyncGroup v5 harness.wire can encode")
    group = unique_name(request, "group-")
    client = wire.coordinator(group)
    for missing in ("protocol_type", "protocol_name"):
        body = {"group_id": group, "generation_id": 1, "member_id": "harness-unknown-member",
                "assignments": [], "protocol_type": "consumer", "protocol_name": "range",
                missing: None}
        answer = client.request(SYNC_GROUP, 5, body)
        assert answer.error_code.value == INCONSISTENT_GROUP_PROTOCOL, (missing, answer)
