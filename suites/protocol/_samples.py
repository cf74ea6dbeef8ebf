"""A safe request for every API a client may send, and the reason for each one it may not.

"Safe" means a shared broker is left as it was: the request is read-only, validate-only, acts on
the test's own unique topic, group or transactional id, or names something that does not exist
(a made-up member, a voter, a broker, a token) so that it is refused. Each sample lists the error
codes a correct broker may answer it with; where Apache Kafka answers with an error because a
feature is off by default (no authorizer, no delegation-token secret, a PLAINTEXT listener, the
KIP-848 coordinator not running in ZooKeeper mode), that error is listed with the KIP that
explains it, so the expectation holds for every broker that implements the API correctly.

APIs no client sends — the controller's and brokers' own requests — are in
:data:`NOT_SENT_BY_CLIENTS` with the reason, so that ``test_every_advertised_api_is_covered`` can
hold the samples to whatever a target advertises.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from harness.wire import protocol
from harness.wire.records import build_batch

from ._wire import (
    API_VERSIONS_BODY,
    ZERO_UUID,
    fetch_body,
    list_offsets_body,
    produce_body,
)

ANY_FILTER = 1  # ResourceType/PatternType/AclOperation/AclPermissionType "ANY"
TOPIC_RESOURCE, LITERAL_PATTERN, READ_OPERATION, ALLOW = 2, 3, 3, 3
SCRAM_SHA_256 = 1
MADE_UP_MEMBER = "harness-unknown-member"
MADE_UP_UUID_MEMBER = "AAAAAAAAAAAAAAAAAAAAAA"  # KIP-848 member ids are 22-character UUIDs
MADE_UP_BROKER = 987_654
NONEXISTENT_LOG_DIR = "/nonexistent/kafka-harness-log-dir"
MADE_UP_HMAC = b"kafka-harness: no such token"


class Route(Enum):
    """The broker a request must reach to be answered, not redirected."""

    ANY = "any"
    LEADER = "leader"                    # of the test topic's partition 0
    GROUP_COORDINATOR = "group"          # of the test's group
    TRANSACTION_COORDINATOR = "txn"      # of the test's transactional id
    CONTROLLER = "controller"


@dataclass(frozen=True)
class Names:
    """What one request may act on: the test's own topic, group and transactional id, and a name
    no topic has (one per version, so a version that creates it does not change the next one's
    answer)."""

    topic: str
    topic_id: uuid.UUID
    group: str
    fresh: str

    @property
    def transactional_id(self) -> str:
        return f"{self.group}-txn"


@dataclass(frozen=True)
class Sample:
    """A safe request for an API: where it goes, its body, the error codes it may get, the
    highest version a client sends (None: every version), and a coordinator a client finds
    first (a transactional producer finds its transaction coordinator before it commits
    offsets through the group coordinator)."""

    route: Route
    body: Callable[[Names], dict[str, Any]]
    errors: frozenset[int]
    client_max_version: int | None = None
    found_first: Route | None = None


def _ok(route: Route, body: Callable[[Names], dict[str, Any]], *errors: str,
        client_max_version: int | None = None, found_first: Route | None = None) -> Sample:
    codes = frozenset(int(protocol.error_code(name).value) for name in errors or ("NONE",))
    return Sample(route, body, codes, client_max_version, found_first)


# A member of a group that does not exist: Kafka's classic coordinator answers
# UNKNOWN_MEMBER_ID, its KIP-848 rewrite may answer GROUP_ID_NOT_FOUND; both say "no such
# membership".
NO_MEMBERSHIP = ("UNKNOWN_MEMBER_ID", "GROUP_ID_NOT_FOUND")
# KIP-848: Apache Kafka 3.9 advertises the consumer group APIs, but its ZooKeeper-mode broker
# runs only the classic group coordinator and answers them UNSUPPORTED_VERSION.
KIP_848_OFF = "UNSUPPORTED_VERSION"
# No authorizer configured: the ACL APIs answer SECURITY_DISABLED [KIP-140].
NO_AUTHORIZER = "SECURITY_DISABLED"
# A PLAINTEXT listener cannot carry delegation-token requests, and a broker without a token
# secret has them disabled [KIP-48].
NO_TOKENS = ("DELEGATION_TOKEN_REQUEST_NOT_ALLOWED", "DELEGATION_TOKEN_AUTH_DISABLED")
# A transactional id that never called InitProducerId has no producer id mapping [KIP-98].
NO_TRANSACTION = "INVALID_PRODUCER_ID_MAPPING"
# A share fetch or acknowledgement at epoch 1 of a session never opened at epoch 0 [KIP-932].
NO_SHARE_SESSION = ("SHARE_SESSION_NOT_FOUND", "INVALID_SHARE_SESSION_EPOCH",
                    "UNKNOWN_MEMBER_ID", "GROUP_ID_NOT_FOUND")
# On a PLAINTEXT connection no SASL exchange is expected [KIP-43, KIP-152].
NO_SASL = "ILLEGAL_SASL_STATE"

SAMPLES: dict[int, Sample] = {
    0: _ok(Route.LEADER, lambda n: produce_body(
        n.topic, build_batch([(b"k", b"round-trip")]), topic_id=n.topic_id)),
    1: _ok(Route.LEADER, lambda n: fetch_body(n.topic, 0, topic_id=n.topic_id)),
    2: _ok(Route.LEADER, lambda n: list_offsets_body(n.topic, -1)),
    3: _ok(Route.ANY, lambda n: {"topics": [{"name": n.topic, "topic_id": ZERO_UUID}],
                                 "allow_auto_topic_creation": False}),
    8: _ok(Route.GROUP_COORDINATOR, lambda n: {
        "group_id": n.group, "generation_id_or_member_epoch": -1, "member_id": "",
        "retention_time": -1, "topics": [{"name": n.topic, "topic_id": n.topic_id, "partitions": [
            {"partition_index": 0, "committed_offset": 0, "committed_leader_epoch": -1,
             "committed_metadata": "round-trip"}]}]}),
    9: _ok(Route.GROUP_COORDINATOR, lambda n: {
        "group_id": n.group, "require_stable": False,
        "topics": [{"name": n.topic, "partition_indexes": [0]}],
        "groups": [{"group_id": n.group, "member_id": None, "member_epoch": -1, "topics": [
            {"name": n.topic, "topic_id": n.topic_id, "partition_indexes": [0]}]}]}),
    10: _ok(Route.ANY, lambda n: {"key": n.group, "key_type": 0, "coordinator_keys": [n.group]},
            "NONE", "COORDINATOR_NOT_AVAILABLE"),
    11: _ok(Route.GROUP_COORDINATOR, lambda n: {
        "group_id": n.group, "session_timeout": 10_000, "rebalance_timeout": 10_000,
        "member_id": MADE_UP_MEMBER, "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}]}, *NO_MEMBERSHIP),
    12: _ok(Route.GROUP_COORDINATOR, lambda n: {"group_id": n.group, "generation_id": 1,
                                                "member_id": MADE_UP_MEMBER}, *NO_MEMBERSHIP),
    13: _ok(Route.GROUP_COORDINATOR, lambda n: {
        "group_id": n.group, "member_id": MADE_UP_MEMBER,
        "members": [{"member_id": MADE_UP_MEMBER}]}, "NONE", *NO_MEMBERSHIP),
    # From v5 (KIP-559) a SyncGroup names its protocol type and name, as clients send them.
    14: _ok(Route.GROUP_COORDINATOR, lambda n: {
        "group_id": n.group, "generation_id": 1, "member_id": MADE_UP_MEMBER,
        "assignments": [], "protocol_type": "consumer", "protocol_name": "range"},
        *NO_MEMBERSHIP),
    # KIP-1043: DescribeGroups v6 names a group that does not exist GROUP_ID_NOT_FOUND.
    15: _ok(Route.GROUP_COORDINATOR, lambda n: {"groups": [n.group],
                                                "include_authorized_operations": False},
            "NONE", "GROUP_ID_NOT_FOUND"),
    16: _ok(Route.ANY, lambda n: {"states_filter": [], "types_filter": []}),
    17: _ok(Route.ANY, lambda n: {"mechanism": "PLAIN"}, NO_SASL),
    18: _ok(Route.ANY, lambda n: API_VERSIONS_BODY),
    19: _ok(Route.CONTROLLER, lambda n: {
        "topics": [{"name": n.fresh, "num_partitions": 1, "replication_factor": 1,
                    "assignments": [], "configs": []}], "timeout": 10_000,
        "validate_only": True}),
    20: _ok(Route.CONTROLLER, lambda n: {"topic_names": [n.fresh], "timeout": 10_000, "topics": [
        {"name": n.fresh, "topic_id": ZERO_UUID}]}, "UNKNOWN_TOPIC_OR_PARTITION"),
    21: _ok(Route.LEADER, lambda n: {"topics": [{"name": n.topic, "partitions": [
        {"partition_index": 0, "offset": 0}]}], "timeout": 10_000}),
    22: _ok(Route.ANY, lambda n: {"transactional_id": None, "transaction_timeout": 60_000,
                                  "producer_id": -1, "producer_epoch": -1}),
    23: _ok(Route.LEADER, lambda n: {"replica_id": -1, "topics": [{"topic": n.topic, "partitions": [
        {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]}),
    # v4+ (KIP-890) batches transactions for brokers verifying them; clients send v0-v3.
    24: _ok(Route.TRANSACTION_COORDINATOR, lambda n: {
        "v3_and_below_transactional_id": n.transactional_id,
        "v3_and_below_producer_id": 1, "v3_and_below_producer_epoch": 0,
        "v3_and_below_topics": [{"name": n.topic, "partitions": [0]}]},
        NO_TRANSACTION, client_max_version=3),
    25: _ok(Route.TRANSACTION_COORDINATOR, lambda n: {
        "transactional_id": n.transactional_id, "producer_id": 1, "producer_epoch": 0,
        "group_id": n.group}, NO_TRANSACTION),
    26: _ok(Route.TRANSACTION_COORDINATOR, lambda n: {
        "transactional_id": n.transactional_id, "producer_id": 1, "producer_epoch": 0,
        "committed": False}, NO_TRANSACTION),
    # Since KIP-890 the group coordinator verifies the transaction with its coordinator first
    # and refuses an unknown one; a broker without that check accepts the pending commit.
    28: _ok(Route.GROUP_COORDINATOR, lambda n: {
        "transactional_id": n.transactional_id, "group_id": n.group, "producer_id": 1,
        "producer_epoch": 0, "generation_id": -1, "member_id": "", "group_instance_id": None,
        "topics": [{"name": n.topic, "partitions": [
            {"partition_index": 0, "committed_offset": 0, "committed_leader_epoch": -1,
             "committed_metadata": ""}]}]},
        "NONE", NO_TRANSACTION, found_first=Route.TRANSACTION_COORDINATOR),
    29: _ok(Route.ANY, lambda n: {
        "resource_type_filter": ANY_FILTER, "resource_name_filter": None,
        "pattern_type_filter": ANY_FILTER, "principal_filter": None, "host_filter": None,
        "operation": ANY_FILTER, "permission_type": ANY_FILTER}, "NONE", NO_AUTHORIZER),
    30: _ok(Route.ANY, lambda n: {"creations": [{
        "resource_type": TOPIC_RESOURCE, "resource_name": n.topic,
        "resource_pattern_type": LITERAL_PATTERN, "principal": "User:kafka-harness",
        "host": "*", "operation": READ_OPERATION, "permission_type": ALLOW}]},
        "NONE", NO_AUTHORIZER),
    31: _ok(Route.ANY, lambda n: {"filters": [{
        "resource_type_filter": TOPIC_RESOURCE, "resource_name_filter": n.topic,
        "pattern_type_filter": LITERAL_PATTERN, "principal_filter": "User:kafka-harness",
        "host_filter": "*", "operation": READ_OPERATION, "permission_type": ALLOW}]},
        "NONE", NO_AUTHORIZER),
    32: _ok(Route.ANY, lambda n: {"resources": [
        {"resource_type": TOPIC_RESOURCE, "resource_name": n.topic, "configuration_keys": None}],
        "include_synonyms": False, "include_documentation": False}),
    33: _ok(Route.CONTROLLER, lambda n: {"validate_only": True, "resources": [
        {"resource_type": TOPIC_RESOURCE, "resource_name": n.topic, "configs": [
            {"name": "retention.ms", "value": "86400000"}]}]}),
    34: _ok(Route.LEADER, lambda n: {"dirs": [{"path": NONEXISTENT_LOG_DIR, "topics": [
        {"name": n.topic, "partitions": [0]}]}]}, "LOG_DIR_NOT_FOUND"),
    35: _ok(Route.LEADER, lambda n: {"topics": [{"topic": n.topic, "partitions": [0]}]}),
    36: _ok(Route.ANY, lambda n: {"auth_bytes": b""}, NO_SASL),
    37: _ok(Route.CONTROLLER, lambda n: {"topics": [{"name": n.topic, "count": 2,
                                                     "assignments": None}],
                                         "timeout": 10_000, "validate_only": True}),
    # A correct broker refuses every token request on a PLAINTEXT connection [KIP-48], so these
    # cannot create or change a token; the made-up HMAC names no token either.
    38: _ok(Route.ANY, lambda n: {"owner_principal_type": None, "owner_principal_name": None,
                                  "renewers": [], "max_lifetime": -1}, *NO_TOKENS),
    39: _ok(Route.ANY, lambda n: {"hmac": MADE_UP_HMAC, "renew_period": -1}, *NO_TOKENS,
            "DELEGATION_TOKEN_NOT_FOUND"),
    40: _ok(Route.ANY, lambda n: {"hmac": MADE_UP_HMAC, "expiry_time_period": -1}, *NO_TOKENS,
            "DELEGATION_TOKEN_NOT_FOUND"),
    41: _ok(Route.ANY, lambda n: {"owners": None}, "NONE", *NO_TOKENS),
    42: _ok(Route.GROUP_COORDINATOR, lambda n: {"groups_names": [n.group]},
            "GROUP_ID_NOT_FOUND"),
    43: _ok(Route.CONTROLLER, lambda n: {"election_type": 0, "timeout": 10_000,
                                         "topic_partitions": [
                                             {"topic": n.topic, "partitions": [0]}]},
            "NONE", "ELECTION_NOT_NEEDED"),
    44: _ok(Route.CONTROLLER, lambda n: {"validate_only": True, "resources": [
        {"resource_type": TOPIC_RESOURCE, "resource_name": n.topic, "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": "86400000"}]}]}),
    # Cancelling a reassignment that is not in progress changes nothing [KIP-455].
    45: _ok(Route.CONTROLLER, lambda n: {
        "timeout": 10_000, "allow_replication_factor_change": True, "topics": [
            {"name": n.topic, "partitions": [{"partition_index": 0, "replicas": None}]}]},
        "NONE", "NO_REASSIGNMENT_IN_PROGRESS"),
    46: _ok(Route.CONTROLLER, lambda n: {"timeout": 10_000, "topics": None}),
    47: _ok(Route.GROUP_COORDINATOR, lambda n: {"group_id": n.group, "topics": [
        {"name": n.topic, "partitions": [{"partition_index": 0}]}]}, "GROUP_ID_NOT_FOUND"),
    48: _ok(Route.ANY, lambda n: {"components": [], "strict": False}),
    49: _ok(Route.ANY, lambda n: {"validate_only": True, "entries": [{
        "entity": [{"entity_type": "client-id", "entity_name": n.group}],
        "ops": [{"key": "producer_byte_rate", "value": 1048576.0, "remove": False}]}]}),
    50: _ok(Route.ANY, lambda n: {"users": [{"name": n.group}]}, "NONE", "RESOURCE_NOT_FOUND"),
    # ZooKeeper-mode Kafka alters credentials on its controller only (NOT_CONTROLLER elsewhere).
    51: _ok(Route.CONTROLLER, lambda n: {
        "deletions": [{"name": n.group, "mechanism": SCRAM_SHA_256}], "upsertions": []},
        "NONE", "RESOURCE_NOT_FOUND"),
    55: _ok(Route.ANY, lambda n: {"topics": [{"topic_name": "__cluster_metadata",
                                              "partitions": [{"partition_index": 0}]}]}),
    57: _ok(Route.CONTROLLER, lambda n: {"timeout": 10_000, "feature_updates": [],
                                         "validate_only": True}),
    60: _ok(Route.ANY, lambda n: {"include_cluster_authorized_operations": False,
                                  "endpoint_type": 1, "include_fenced_brokers": False}),
    61: _ok(Route.LEADER, lambda n: {"topics": [{"name": n.topic, "partition_indexes": [0]}]}),
    64: _ok(Route.ANY, lambda n: {"broker_id": MADE_UP_BROKER}, "BROKER_ID_NOT_REGISTERED"),
    65: _ok(Route.TRANSACTION_COORDINATOR, lambda n: {"transactional_ids": [n.transactional_id]},
            "TRANSACTIONAL_ID_NOT_FOUND"),
    66: _ok(Route.ANY, lambda n: {"state_filters": [], "producer_id_filters": []}),
    # A made-up member leaving (epoch -1) a group that does not exist [KIP-848].
    68: _ok(Route.GROUP_COORDINATOR, lambda n: {
        "group_id": n.group, "member_id": MADE_UP_MEMBER, "member_epoch": -1,
        "instance_id": None, "rack_id": None, "rebalance_timeout": -1,
        "subscribed_topic_names": None, "server_assignor": None, "topic_partitions": None},
        *NO_MEMBERSHIP, KIP_848_OFF),
    69: _ok(Route.GROUP_COORDINATOR, lambda n: {"group_ids": [n.group],
                                                "include_authorized_operations": False},
            "NONE", "GROUP_ID_NOT_FOUND", KIP_848_OFF),
    # KIP-714: a client with no instance id yet is given one (and the broker's subscriptions);
    # a push for a subscription the broker never handed out is refused.
    71: _ok(Route.ANY, lambda n: {"client_instance_id": ZERO_UUID}),
    72: _ok(Route.ANY, lambda n: {"client_instance_id": ZERO_UUID, "subscription_id": 0,
                                  "terminating": False, "compression_type": 0,
                                  "metrics": b""},
            "UNKNOWN_SUBSCRIPTION_ID", "INVALID_REQUEST"),
    74: _ok(Route.ANY, lambda n: {"resource_types": []}),
    75: _ok(Route.ANY, lambda n: {"topics": [{"name": n.topic}], "response_partition_limit": 100,
                                  "cursor": None}),
    # KIP-932 share groups and KIP-1071 streams groups: a made-up member leaving, describing
    # or altering a group that does not exist, a share session that was never opened.
    76: _ok(Route.GROUP_COORDINATOR, lambda n: {
        "group_id": n.group, "member_id": MADE_UP_UUID_MEMBER, "member_epoch": -1,
        "rack_id": None, "subscribed_topic_names": None}, *NO_MEMBERSHIP),
    77: _ok(Route.GROUP_COORDINATOR, lambda n: {"group_ids": [n.group],
                                                "include_authorized_operations": False},
            "GROUP_ID_NOT_FOUND"),
    78: _ok(Route.LEADER, lambda n: {
        "group_id": n.group, "member_id": MADE_UP_UUID_MEMBER, "share_session_epoch": 1,
        "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 10,
        "batch_size": 10, "topics": [{"topic_id": n.topic_id, "partitions": [
            {"partition_index": 0, "acknowledgement_batches": []}]}],
        "forgotten_topics_data": []}, *NO_SHARE_SESSION),
    79: _ok(Route.LEADER, lambda n: {
        "group_id": n.group, "member_id": MADE_UP_UUID_MEMBER, "share_session_epoch": 1,
        "topics": [{"topic_id": n.topic_id, "partitions": [
            {"partition_index": 0, "acknowledgement_batches": []}]}]}, *NO_SHARE_SESSION),
    88: _ok(Route.GROUP_COORDINATOR, lambda n: {
        "group_id": n.group, "member_id": MADE_UP_UUID_MEMBER, "member_epoch": -1,
        "endpoint_information_epoch": 0, "rebalance_timeout": -1, "topology": None,
        "active_tasks": None, "standby_tasks": None, "warmup_tasks": None, "process_id": None,
        "user_endpoint": None, "client_tags": None, "task_offsets": None,
        "task_end_offsets": None, "shutdown_application": False}, *NO_MEMBERSHIP),
    89: _ok(Route.GROUP_COORDINATOR, lambda n: {"group_ids": [n.group],
                                                "include_authorized_operations": False},
            "GROUP_ID_NOT_FOUND"),
    90: _ok(Route.GROUP_COORDINATOR, lambda n: {"groups": [{"group_id": n.group,
                                                            "topics": None}]},
            "NONE", "GROUP_ID_NOT_FOUND"),
    # Altering the offsets of a share group that does not exist yet starts it there [KIP-932].
    91: _ok(Route.GROUP_COORDINATOR, lambda n: {"group_id": n.group, "topics": [
        {"topic_name": n.topic, "partitions": [{"partition_index": 0, "start_offset": 0}]}]},
        "NONE", "GROUP_ID_NOT_FOUND"),
    92: _ok(Route.GROUP_COORDINATOR, lambda n: {"group_id": n.group, "topics": [
        {"topic_name": n.topic}]}, "GROUP_ID_NOT_FOUND"),
}

_BY_BROKERS = "sent only by brokers and controllers to one another, never by a client"
NOT_SENT_BY_CLIENTS: dict[int, str] = {
    4: f"LeaderAndIsr is {_BY_BROKERS} (ZooKeeper mode)",
    5: f"StopReplica is {_BY_BROKERS} (ZooKeeper mode)",
    6: f"UpdateMetadata is {_BY_BROKERS} (ZooKeeper mode)",
    7: f"ControlledShutdown is {_BY_BROKERS} (ZooKeeper mode)",
    27: f"WriteTxnMarkers is {_BY_BROKERS} (the transaction coordinator to partition leaders)",
    52: f"Vote is {_BY_BROKERS} (KRaft)",
    53: f"BeginQuorumEpoch is {_BY_BROKERS} (KRaft)",
    54: f"EndQuorumEpoch is {_BY_BROKERS} (KRaft)",
    56: f"AlterPartition is {_BY_BROKERS}",
    58: f"Envelope is {_BY_BROKERS} (forwarding)",
    59: f"FetchSnapshot is {_BY_BROKERS} (KRaft)",
    62: f"BrokerRegistration is {_BY_BROKERS} (KRaft)",
    63: f"BrokerHeartbeat is {_BY_BROKERS} (KRaft)",
    67: f"AllocateProducerIds is {_BY_BROKERS}",
    70: f"ControllerRegistration is {_BY_BROKERS} (KRaft)",
    73: f"AssignReplicasToDirs is {_BY_BROKERS} (KIP-858)",
    80: "AddRaftVoter changes the controller quorum (KIP-853): no request is both valid and "
        "harmless",
    81: "RemoveRaftVoter changes the controller quorum (KIP-853): no request is both valid and "
        "harmless",
    82: f"UpdateRaftVoter is {_BY_BROKERS} (KIP-853)",
    83: f"InitializeShareGroupState is {_BY_BROKERS} (KIP-932 share coordinator)",
    84: f"ReadShareGroupState is {_BY_BROKERS} (KIP-932 share coordinator)",
    85: f"WriteShareGroupState is {_BY_BROKERS} (KIP-932 share coordinator)",
    86: f"DeleteShareGroupState is {_BY_BROKERS} (KIP-932 share coordinator)",
    87: f"ReadShareGroupStateSummary is {_BY_BROKERS} (KIP-932 share coordinator)",
}
