"""What Apache Kafka 3.9.2 (ZooKeeper mode) advertises in ApiVersions, and where the reference
broker is allowed to differ.

The reference broker is a ZooKeeper-mode broker modelled on Kafka 3.9, so the tests that check
what it advertises, or that try "every version" of an API, take their expectation from Kafka —
the ranges one Kafka 3.9.2 broker answered, checked into ``tests/data`` — and never from the
broker's own handler registry, which would only test the broker against itself.
``tests/differential`` asks a running Kafka 3.9.2 again and fails when the file is stale.

Where the reference broker advertises something else, the difference is listed here with its
reason (:data:`NOT_IMPLEMENTED`, :data:`LOWEST_DECODABLE`, :data:`CONTROLLER_API_VERSIONS`);
:func:`expected_reference_ranges` is Kafka's ranges with exactly those differences applied.

Regenerate the file (starts ZooKeeper and one Kafka 3.9.2 broker, then stops them)::

    .venv/bin/python -m tests.kafka_api_versions
"""

from __future__ import annotations

import datetime
import json
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.raw_client import RawClient
from harness.wire import protocol

DATA = Path(__file__).resolve().parent / "data" / "kafka-3.9.2-api-versions.json"
KAFKA_VERSION = "3.9.2"
API_VERSIONS, CAPTURE_VERSION = 18, 3
Ranges = dict[int, tuple[int, int]]

# APIs Kafka 3.9 advertises that the reference broker does not implement (so does not advertise;
# the protocol suite skips them on it with the reason). Implementing one means removing it here,
# and the tests then hold its range to Kafka's.
_SECURITY = ("PLAINTEXT listeners only: no SASL, ACLs, quotas, delegation tokens or SCRAM "
             "credentials")
_INTER_BROKER = ("a ZooKeeper-mode inter-broker request the reference cluster does not use: its "
                 "brokers write ISR changes and claim producer-id blocks in ZooKeeper "
                 "themselves, and nothing forwards requests")
NOT_IMPLEMENTED: dict[int, str] = {
    17: _SECURITY,  # SaslHandshake
    21: "DeleteRecords is not implemented",
    29: _SECURITY,  # DescribeAcls
    30: _SECURITY,  # CreateAcls
    31: _SECURITY,  # DeleteAcls
    33: "AlterConfigs (the legacy, whole-set form) is not implemented; IncrementalAlterConfigs is",
    34: "the log-directory APIs are not implemented",  # AlterReplicaLogDirs
    35: "the log-directory APIs are not implemented",  # DescribeLogDirs
    36: _SECURITY,  # SaslAuthenticate
    38: _SECURITY,  # CreateDelegationToken
    39: _SECURITY,  # RenewDelegationToken
    40: _SECURITY,  # ExpireDelegationToken
    41: _SECURITY,  # DescribeDelegationToken
    45: "reassignments are made through /admin/reassign_partitions only (pre-KIP-455)",
    46: "reassignments are made through /admin/reassign_partitions only (pre-KIP-455)",
    48: _SECURITY,  # DescribeClientQuotas
    49: _SECURITY,  # AlterClientQuotas
    50: _SECURITY,  # DescribeUserScramCredentials
    51: _SECURITY,  # AlterUserScramCredentials
    56: _INTER_BROKER,  # AlterPartition
    57: "no feature versioning (KIP-584): UpdateFeatures is not implemented",
    58: _INTER_BROKER,  # Envelope
    60: "DescribeCluster is not implemented (clients take the brokers from Metadata)",
    67: _INTER_BROKER,  # AllocateProducerIds
    68: ("KIP-848: Kafka 3.9 in ZooKeeper mode advertises ConsumerGroupHeartbeat but answers it "
         "UNSUPPORTED_VERSION (its only group coordinator is the classic one); the reference "
         "broker has the classic coordinator only and does not advertise it"),
    69: ("KIP-848: Kafka 3.9 in ZooKeeper mode advertises ConsumerGroupDescribe but answers it "
         "UNSUPPORTED_VERSION; the reference broker does not advertise it"),
}

# The lowest version the reference broker serves where Kafka 3.9 serves older ones: harness.wire
# decodes requests with kio 0.6.5, generated from Kafka 4's schemas, and Kafka 4.0 removed these
# old versions (KIP-896), so there are no types to decode them with. Each bound is kio's lowest
# modelled version (a test checks that, so a kio that models more makes the entry fail).
LOWEST_DECODABLE: dict[int, int] = {
    0: 3,  # Produce v0-2 (message formats before record batches)
    1: 4,  # Fetch v0-3
    2: 1,  # ListOffsets v0
    8: 2,  # OffsetCommit v0-1
    9: 1,  # OffsetFetch v0
    19: 2,  # CreateTopics v0-1
    20: 1,  # DeleteTopics v0
    23: 2,  # OffsetForLeaderEpoch v0-1
    27: 1,  # WriteTxnMarkers v0
    32: 1,  # DescribeConfigs v0
}

# The controller -> broker APIs of ZooKeeper mode: only a controller sends them, and the
# reference broker's controller is a reference broker. kio has no types for them;
# harness/wire/zk_era.py declares one version each, the first flexible one that carries every
# field a ZooKeeper-mode controller sends without topic ids or KRaft-migration flags (which
# Kafka 3.9's higher versions add). A standalone reference broker (no ZooKeeper) has no
# controller and does not advertise them at all.
CONTROLLER_API_VERSIONS: dict[int, tuple[int, int]] = {
    4: (4, 4),  # LeaderAndIsr; Kafka 3.9: 0-7
    5: (3, 3),  # StopReplica; Kafka 3.9: 0-4
    6: (6, 6),  # UpdateMetadata; Kafka 3.9: 0-8
    7: (3, 3),  # ControlledShutdown; Kafka 3.9: 0-3
}


def load() -> Ranges:
    """api key -> (min, max) as Kafka 3.9.2 advertised it, from the checked-in file."""
    document = json.loads(DATA.read_text())
    return {api["api_key"]: (api["min_version"], api["max_version"])
            for api in document["apis"]}


def versions(api_key: int, kafka: Ranges | None = None) -> list[int]:
    """Every version of ``api_key`` Kafka 3.9 advertises (none when it does not)."""
    ranges = load() if kafka is None else kafka
    if api_key not in ranges:
        return []
    low, high = ranges[api_key]
    return list(range(low, high + 1))


def expected_reference_ranges(kafka: Ranges | None = None, *,
                              zookeeper_mode: bool = True) -> Ranges:
    """What the reference broker must advertise: Kafka 3.9's range of every API but those in
    :data:`NOT_IMPLEMENTED`, narrowed only as :data:`LOWEST_DECODABLE` and
    :data:`CONTROLLER_API_VERSIONS` say (the latter left out when standalone)."""
    ranges = load() if kafka is None else kafka
    expected: Ranges = {}
    for api_key, (low, high) in ranges.items():
        if api_key in NOT_IMPLEMENTED:
            continue
        if api_key in CONTROLLER_API_VERSIONS:
            if zookeeper_mode:
                expected[api_key] = CONTROLLER_API_VERSIONS[api_key]
            continue
        expected[api_key] = (max(low, LOWEST_DECODABLE.get(api_key, low)), high)
    return expected


def advertised(client: RawClient, version: int = CAPTURE_VERSION) -> Ranges:
    """api key -> (min, max) from one ApiVersions request at ``version``."""
    return client.advertised(version)


def document(ranges: Mapping[int, tuple[int, int]], kafka_version: str) -> dict[str, Any]:
    """The file's contents for ``ranges`` (the test compares only ``apis`` and the version)."""
    return {
        "kafka_version": kafka_version,
        "mode": "ZooKeeper, one broker (target apache-kafka)",
        "request": f"ApiVersions v{CAPTURE_VERSION}",
        "captured": datetime.date.today().isoformat(),
        "regenerate": ".venv/bin/python -m tests.kafka_api_versions",
        "apis": [{"api_key": key, "name": protocol.api_name(key), "min_version": low,
                  "max_version": high} for key, (low, high) in sorted(ranges.items())],
    }


def capture() -> dict[str, Any]:
    """Start one Kafka 3.9.2 broker, ask it ApiVersions, stop it; the file's document."""
    from harness.cluster.targets import start_target

    with tempfile.TemporaryDirectory(prefix="kafka-api-versions-") as run_dir:
        target = start_target("apache-kafka", brokers=1, run_dir=Path(run_dir))
        try:
            if target.version != KAFKA_VERSION:
                raise RuntimeError(f"started Kafka {target.version}, not {KAFKA_VERSION}")
            host, _, port = target.bootstrap.split(",")[0].rpartition(":")
            with RawClient(host, int(port)) as client:
                return document(advertised(client), target.version)
        finally:
            target.close()


def to_json(made: dict[str, Any]) -> str:
    """The document as JSON with one API per line, so a regenerated file diffs by API."""
    head = {key: value for key, value in made.items() if key != "apis"}
    lines = [f"  {json.dumps(key)}: {json.dumps(value)}," for key, value in head.items()]
    apis = ",\n".join(f"    {json.dumps(api)}" for api in made["apis"])
    return "{\n" + "\n".join(lines) + '\n  "apis": [\n' + apis + "\n  ]\n}\n"


def main() -> int:
    made = capture()
    DATA.parent.mkdir(parents=True, exist_ok=True)
    DATA.write_text(to_json(made))
    print(f"{DATA}: {len(made['apis'])} APIs advertised by Kafka {made['kafka_version']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
