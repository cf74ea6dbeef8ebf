"""Every API the broker implements, at every version Apache Kafka 3.9 serves: encoded,
answered, decoded.

The versions are Kafka's (``tests/kafka_api_versions.py``), not the broker's registry, so a
version Kafka serves and the broker drops shows up here. The old versions the broker cannot
decode (kio has no types for them) are listed as skipped with that reason, not left out.
"""

import uuid

import pytest

from harness.raw_client import RawClient
from harness.waiting import wait_for
from harness.wire import protocol
from harness.wire.records import build_batch
from tests import kafka_api_versions as kafka

from .conftest import create_topic


def _cases() -> list:
    """(api key, version) for every version of every API Kafka 3.9 advertises, except the APIs
    the broker does not implement and the controller -> broker APIs, which it serves only in
    ZooKeeper mode (tests/cluster_mode covers them)."""
    cases = []
    for api_key in sorted(kafka.expected_reference_ranges(zookeeper_mode=False)):
        lowest = kafka.LOWEST_DECODABLE.get(api_key, 0)
        for version in kafka.versions(api_key):
            if version < lowest:
                reason = (f"{protocol.api_name(api_key)} v{version}: Kafka 3.9 serves it, "
                          "kio (Kafka 4's schemas, KIP-896) cannot decode it")
                cases.append(pytest.param(api_key, version, marks=pytest.mark.skip(reason)))
            else:
                cases.append((api_key, version))
    return cases


CASES = _cases()


def _sample(api_key: int, version: int, topic: str, topic_id: uuid.UUID) -> dict:
    fresh = f"v-{api_key}-{version}-{uuid.uuid4().hex[:6]}"
    batch = build_batch([(b"k", f"{api_key}/{version}".encode())])
    return {
        0: {"acks": -1, "timeout": 5000, "topic_data": [
            {"name": topic, "topic_id": topic_id,
             "partition_data": [{"index": 0, "records": batch}]}]},
        1: {"replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "topic_id": topic_id, "partitions": [
                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
                 "current_leader_epoch": -1, "log_start_offset": -1,
                 "last_fetched_epoch": -1}]}]},
        2: {"replica_id": -1, "isolation_level": 0, "timeout": 1000, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1,
                                            "current_leader_epoch": -1}]}]},
        3: {"topics": [{"name": topic, "topic_id": uuid.UUID(int=0)}],
            "allow_auto_topic_creation": False},
        18: {"client_software_name": "kafka-harness", "client_software_version": "1"},
        19: {"topics": [{"name": fresh, "num_partitions": 1, "replication_factor": 1,
                         "assignments": [], "configs": []}], "timeout": 5000,
             "validate_only": False},
        20: {"topic_names": [fresh], "topics": [{"name": fresh, "topic_id": uuid.UUID(int=0)}],
             "timeout": 5000},
        22: {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1,
             "producer_epoch": -1},
        32: {"resources": [{"resource_type": 2, "resource_name": topic,
                            "configuration_keys": None}], "include_synonyms": True,
             "include_documentation": True},
        37: {"topics": [{"name": fresh, "count": 2, "assignments": None}], "timeout": 5000,
             "validate_only": True},
        8: {"group_id": GROUP, "generation_id_or_member_epoch": -1, "member_id": "",
            "retention_time": -1, "topics": [{"name": topic, "topic_id": topic_id, "partitions": [
                {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                 "committed_metadata": None}]}]},
        9: {"group_id": GROUP, "require_stable": False,
            "topics": [{"name": topic, "partition_indexes": [0]}],
            "groups": [{"group_id": GROUP, "member_id": None, "member_epoch": -1, "topics": [
                {"name": topic, "topic_id": topic_id, "partition_indexes": [0]}]}]},
        10: {"key": GROUP, "key_type": 0, "coordinator_keys": [GROUP]},
        11: {"group_id": fresh, "session_timeout": 10000, "rebalance_timeout": 10000,
             "member_id": "unknown", "protocol_type": "consumer",
             "protocols": [{"name": "range", "metadata": b""}]},
        12: {"group_id": fresh, "generation_id": 1, "member_id": "unknown"},
        13: {"group_id": fresh, "member_id": "unknown", "members": [{"member_id": "unknown"}]},
        14: {"group_id": fresh, "generation_id": 1, "member_id": "unknown", "assignments": [],
             "protocol_type": "consumer", "protocol_name": "range"},
        15: {"groups": [GROUP], "include_authorized_operations": False},
        16: {"states_filter": [], "types_filter": []},
        42: {"groups_names": [fresh]},
        47: {"group_id": GROUP, "topics": [{"name": topic, "partitions": [
            {"partition_index": 0}]}]},
        27: {"markers": [{"producer_id": 1 << 40, "producer_epoch": 0, "transaction_result": True,
                          "topics": [{"name": topic, "partition_indexes": [0]}],
                          "coordinator_epoch": 0}]},
        # The transaction APIs name a transactional id the coordinator never saw.
        24: {"v3_and_below_transactional_id": TXN_ID, "v3_and_below_producer_id": 1,
             "v3_and_below_producer_epoch": 0,
             "v3_and_below_topics": [{"name": topic, "partitions": [0]}],
             "transactions": [{"transactional_id": TXN_ID, "producer_id": 1,
                               "producer_epoch": 0, "verify_only": True,
                               "topics": [{"name": topic, "partitions": [0]}]}]},
        25: {"transactional_id": TXN_ID, "producer_id": 1, "producer_epoch": 0,
             "group_id": GROUP},
        26: {"transactional_id": TXN_ID, "producer_id": 1, "producer_epoch": 0,
             "committed": False},
        28: {"transactional_id": TXN_ID, "group_id": GROUP, "producer_id": 1,
             "producer_epoch": 0, "generation_id": -1, "member_id": "",
             "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                 {"partition_index": 0, "committed_offset": 0, "committed_leader_epoch": -1,
                  "committed_metadata": ""}]}]},
        61: {"topics": [{"name": topic, "partition_indexes": [0]}]},
        65: {"transactional_ids": [TXN_ID]},
        66: {"state_filters": [], "producer_id_filters": [], "duration_filter": -1},
        23: {"replica_id": -1, "topics": [{"topic": topic, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]},
        43: {"election_type": 0, "topic_partitions": [{"topic": topic, "partitions": [0]}],
             "timeout": 5000},
        44: {"resources": [{"resource_type": 2, "resource_name": topic, "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": "86400000"}]}],
             "validate_only": False},
    }[api_key]


# Per API: the error codes a minimal, valid request may legitimately get back. Membership
# requests name an unknown member (UNKNOWN_MEMBER_ID, 25) so none waits for a rebalance. The
# transactional ones name a transactional id never initialized (INVALID_PRODUCER_ID_MAPPING,
# 49) — TxnOffsetCommit too, whose verification asks the coordinator (KIP-890 part 1).
EXPECTED_ERRORS = {20: {0, 3}, 37: {3}, 11: {25}, 12: {25}, 13: {0, 25}, 14: {25}, 42: {69},
                   43: {0, 84}, 24: {0, 49}, 25: {49}, 26: {49}, 28: {49}, 65: {105}}
GROUP = "every-version"
TXN_ID = "every-version-txn"


def _errors(response) -> set[int]:
    found = set()

    def walk(value):
        if hasattr(value, "__dataclass_fields__"):
            for name in value.__dataclass_fields__:
                item = getattr(value, name)
                if name == "error_code":
                    found.add(item.value)
                walk(item)
        elif isinstance(value, tuple):
            for item in value:
                walk(item)

    walk(response)
    return found


@pytest.fixture(scope="module")
def target(broker):
    name = create_topic(broker.bootstrap)
    with RawClient(broker.host, broker.port) as raw:
        md = raw.request(3, 12, {"topics": [{"name": name}]})
        raw.request(10, 3, {"key": GROUP, "key_type": 0})  # creates __consumer_offsets
        raw.request(10, 3, {"key": TXN_ID, "key_type": 1})  # creates __transaction_state
        wait_for(lambda: _errors(raw.request(65, 0, _sample(65, 0, name, md.topics[0].topic_id)))
                 == {105}, 30, "the transaction coordinator to load its partitions")
        # The group exists before any case runs, whatever the order (OffsetDelete answers
        # GROUP_ID_NOT_FOUND for a group with no offsets; under xdist the cases are split).
        wait_for(lambda: _errors(raw.request(8, 8, _sample(8, 8, name, md.topics[0].topic_id)))
                 == {0}, 30, f"an offset commit that creates {GROUP}")
        yield raw, name, md.topics[0].topic_id


def test_the_cases_cover_the_issue_apis():
    tried = {case.values[0] if hasattr(case, "values") else case[0] for case in CASES}
    assert tried >= {0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 19, 20, 22, 24, 25, 26,
                     32, 37, 42, 44, 47, 65, 66}


@pytest.mark.parametrize("api_key,version", CASES)
def test_advertised_version_is_served(target, api_key, version):
    raw, topic, topic_id = target
    response = raw.request(api_key, version, _sample(api_key, version, topic, topic_id))
    assert _errors(response) <= EXPECTED_ERRORS.get(api_key, {0})
