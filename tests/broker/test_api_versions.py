"""ApiVersions: the reference broker advertises what Apache Kafka 3.9.2 advertises.

The expectation is Kafka's own answer (``tests/data/kafka-3.9.2-api-versions.json``, kept
current by ``tests/differential``), not the broker's handler registry: a test that read the
registry would pass whatever the broker claimed. Every way the broker may differ is declared in
``tests/kafka_api_versions.py`` with its reason, and the reasons are checked here too.
"""

from __future__ import annotations

from harness.raw_client import RawClient
from harness.wire import protocol
from reference_broker.server.apis.api_versions import advertised as registry_advertisement
from tests import kafka_api_versions as kafka

API_VERSIONS = 18


def test_a_standalone_broker_advertises_kafka_39s_ranges(broker):
    """Every API it implements at Kafka 3.9's range, but for the declared differences; a
    standalone broker has no controller, so no controller -> broker APIs."""
    with RawClient(broker.host, broker.port) as client:
        for version in kafka.versions(API_VERSIONS):
            assert kafka.advertised(client, version) == kafka.expected_reference_ranges(
                zookeeper_mode=False), f"ApiVersions v{version}"


def test_a_zookeeper_mode_broker_advertises_kafka_39s_ranges():
    """The ZooKeeper-mode advertisement, built in-process (tests/differential asks a running
    reference cluster and a running Kafka 3.9.2 the same over the wire)."""
    ranges = {a["api_key"]: (a["min_version"], a["max_version"])
              for a in registry_advertisement(zookeeper_mode=True)}
    assert ranges == kafka.expected_reference_ranges(zookeeper_mode=True)


def test_every_declared_difference_still_has_its_reason():
    """A difference from Kafka 3.9 stays listed only while its reason holds: the old versions
    are exactly the ones kio cannot decode, the controller APIs' one version is the one
    harness.wire models, and every unimplemented API is one Kafka advertises."""
    ranges = kafka.load()
    for api_key, lowest in kafka.LOWEST_DECODABLE.items():
        name = protocol.api_name(api_key)
        assert ranges[api_key][0] < lowest, f"{name}: Kafka 3.9 starts at {ranges[api_key]}"
        assert protocol.modelled_versions(api_key)[0] == lowest, f"{name}: kio models more now"
    for api_key, (low, high) in kafka.CONTROLLER_API_VERSIONS.items():
        kafka_low, kafka_high = ranges[api_key]
        assert kafka_low <= low <= high <= kafka_high
        assert protocol.modelled_versions(api_key) == tuple(range(low, high + 1))
    assert kafka.NOT_IMPLEMENTED.keys() <= ranges.keys()
    assert all(reason.strip() for reason in kafka.NOT_IMPLEMENTED.values())
    declared = [set(kafka.NOT_IMPLEMENTED), set(kafka.LOWEST_DECODABLE),
                set(kafka.CONTROLLER_API_VERSIONS)]
    assert all(not a & b for i, a in enumerate(declared) for b in declared[i + 1:])


def test_every_expected_version_is_one_harness_wire_models():
    """What the broker must advertise it can also decode and answer."""
    for api_key, (low, high) in kafka.expected_reference_ranges().items():
        assert set(range(low, high + 1)) <= set(protocol.modelled_versions(api_key)), \
            protocol.api_name(api_key)
