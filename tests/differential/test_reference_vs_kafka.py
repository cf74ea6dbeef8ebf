"""The reference broker against Apache Kafka 3.9, answer by answer.

Both run as one-broker ZooKeeper-mode clusters with the same configuration. Every API both
advertise that the protocol suite has a safe request for (``suites/protocol/_samples.py``) is
sent to both at every version both advertise, with the same names (topic, group, transactional
id), and the two answers are compared field by field once decoded. The only fields allowed to
differ are listed in :data:`MAY_DIFFER`, each with the reason it is instance-specific. A
difference anywhere else is the reference broker answering differently from Kafka — fix the
broker — or a test that must learn what Kafka does. Malformed frames (the protocol suite's)
must get the same treatment from both: the connection closed without a byte.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from harness.cluster.targets import Target, start_target
from harness.raw_client import RawClients
from harness.wire import protocol
from suites.protocol._exchange import exchange
from suites.protocol._samples import SAMPLES, Names
from suites.protocol._wire import METADATA, Wire, encodable_versions
from suites.protocol.test_malformed_frames import BAD_FRAME_NAMES, CLOSE_WAIT_S, _bad_frames
from tests import kafka_api_versions

# Fields whose values belong to one broker instance or moment, not to the protocol.
MAY_DIFFER = {
    "throttle_time": "how long a broker asks a client to back off is its own quota's business",
    "topic_id": "a topic's id is a random UUID made at creation",
    "cluster_id": "a random id made when the cluster's ZooKeeper is first used",
    "node_id": "broker ids: each cluster numbers its own",
    "controller_id": "broker ids: each cluster numbers its own",
    "leader_id": "broker ids: each cluster numbers its own",
    "host": "each broker listens where the harness put it",
    "port": "each broker listens where the harness put it",
    "error_message": "free text; the error code carries the meaning",
    "member_id": "made by the coordinator from the client id and a random UUID",
    "producer_id": "allocated from the cluster's own producer-id blocks",
    "log_append_time": "the broker's clock",
    "timestamp": "the broker's clock",
    "api_keys": "compared on their own, with the declared differences: "
                "test_the_reference_broker_advertises_kafka_39s_ranges",
}
SAME_NAMES = f"differential-{uuid.uuid4().hex[:8]}"
BROKER_PROPERTIES = {"group.initial.rebalance.delay.ms": 0, "offsets.topic.replication.factor": 1,
                     "auto.create.topics.enable": "true"}


@dataclass
class Side:
    target: Target
    wire: Wire
    clients: RawClients

    def names(self, topic: str, version: int) -> Names:
        return Names(topic, self.wire.topic_id(topic), f"{SAME_NAMES}-group",
                     f"{SAME_NAMES}-unused-v{version}")


def _side(kind: str, run_dir: Path) -> Side:
    target = start_target(kind, brokers=1, run_dir=run_dir, properties=BROKER_PROPERTIES)
    clients = RawClients(target.bootstrap)
    return Side(target, Wire(clients, clients.bootstrap), clients)


@pytest.fixture(scope="module")
def sides(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Side]]:
    made: dict[str, Side] = {}
    try:
        for kind in ("apache-kafka", "reference"):
            made[kind] = _side(kind, tmp_path_factory.mktemp(kind))
        for side in made.values():
            admin = AdminClient({"bootstrap.servers": side.target.bootstrap})
            admin.create_topics([NewTopic(SAME_NAMES, 1, 1)])[SAME_NAMES].result(30)
            side.wire.wait_known_everywhere(SAME_NAMES)
        yield made
    finally:
        for side in made.values():
            side.clients.close()
            side.target.close()


def comparable(answer: Any) -> Any:
    """An answer with its config lists sorted by name: Kafka lists a topic's configs in the
    order of a Java hash map, which says nothing."""
    if isinstance(answer, dict):
        return {key: comparable(value) for key, value in answer.items()}
    if isinstance(answer, list):
        if answer and all(isinstance(x, dict) and "config_source" in x for x in answer):
            return [comparable(x) for x in sorted(answer, key=lambda x: x["name"])]
        return [comparable(x) for x in answer]
    return answer


def differences(ours: Any, kafkas: Any, path: str = "") -> list[str]:
    """Where two decoded answers differ, outside :data:`MAY_DIFFER` (``path: ours != Kafka's``)."""
    if isinstance(ours, dict) and isinstance(kafkas, dict):
        found = []
        for key in sorted(set(ours) | set(kafkas)):
            if key in MAY_DIFFER:
                continue
            found += differences(ours.get(key), kafkas.get(key), f"{path}.{key}")
        return found
    if isinstance(ours, list) and isinstance(kafkas, list):
        if len(ours) != len(kafkas):
            return [f"{path}: {len(ours)} items != Kafka's {len(kafkas)}"]
        return [d for i, (a, b) in enumerate(zip(ours, kafkas, strict=True))
                for d in differences(a, b, f"{path}[{i}]")]
    return [] if ours == kafkas else [f"{path}: {ours!r} != Kafka's {kafkas!r}"]


def test_differences_skip_only_the_declared_fields() -> None:
    """The comparison itself: declared fields are ignored at any depth, nothing else is."""
    ours = {"throttle_time": 1, "topics": [{"name": "t", "error_code": 0, "topic_id": "a"}]}
    kafkas = {"throttle_time": 9, "topics": [{"name": "t", "error_code": 3, "topic_id": "b"}]}
    assert differences(ours, kafkas) == [".topics[0].error_code: 0 != Kafka's 3"]
    assert differences({"a": [1, 2]}, {"a": [1]}) == [".a: 2 items != Kafka's 1"]
    configs = [{"name": n, "config_source": 5} for n in ("b", "a")]
    assert comparable({"configs": configs}) == {"configs": [
        {"name": "a", "config_source": 5}, {"name": "b", "config_source": 5}]}


def test_the_recorded_kafka_api_versions_are_current(sides: dict[str, Side]) -> None:
    """``tests/data/kafka-3.9.2-api-versions.json``, which the project's own tests take their
    ApiVersions expectations from, is what the running Kafka advertises — at every ApiVersions
    version — so the file cannot go stale unnoticed. Regenerate it with
    ``python -m tests.kafka_api_versions``."""
    kafka = sides["apache-kafka"]
    assert kafka.target.version == kafka_api_versions.KAFKA_VERSION
    recorded = kafka_api_versions.load()
    for version in kafka_api_versions.versions(kafka_api_versions.API_VERSIONS, recorded):
        assert kafka_api_versions.advertised(kafka.wire.bootstrap, version) == recorded, \
            f"Kafka {kafka.target.version} advertises otherwise at ApiVersions v{version}"


def test_the_reference_broker_advertises_kafka_39s_ranges(sides: dict[str, Side]) -> None:
    """The reference broker in ZooKeeper mode advertises Kafka 3.9's range for every API,
    but for the differences ``tests/kafka_api_versions.py`` declares with their reasons."""
    kafka, reference = (side.wire.bootstrap for side in (sides["apache-kafka"],
                                                          sides["reference"]))
    expected = kafka_api_versions.expected_reference_ranges(
        kafka_api_versions.advertised(kafka), zookeeper_mode=True)
    assert kafka_api_versions.advertised(reference) == expected


@pytest.mark.parametrize("api_key", sorted(SAMPLES), ids=protocol.api_name)
def test_the_reference_broker_answers_as_apache_kafka_does(
        sides: dict[str, Side], api_key: int) -> None:
    """Every version of every API both brokers advertise gets the same answer from both,
    field by field, but for the declared instance-specific fields."""
    kafka, reference = sides["apache-kafka"], sides["reference"]
    versions = sorted(set(encodable_versions(kafka.wire.advertised, api_key))
                      & set(encodable_versions(reference.wire.advertised, api_key)))
    if not versions:
        pytest.skip(f"{protocol.api_name(api_key)} is not advertised by both at a common "
                    f"version (Kafka {kafka.wire.advertised.get(api_key)}, reference "
                    f"{reference.wire.advertised.get(api_key)})")
    sample = SAMPLES[api_key]
    found = []
    for version in versions:
        answers = {}
        for name, side in sides.items():
            names = side.names(SAME_NAMES, version)
            _, frame = exchange(side.wire, api_key, version, sample, names)
            _, body = protocol.decode_response(api_key, version, frame)
            answers[name] = comparable(protocol.to_plain(body))
        found += [f"v{version}{d}" for d in differences(answers["reference"],
                                                        answers["apache-kafka"])]
    assert not found, "the reference broker answered differently:\n" + "\n".join(found)


def _after(side: Side, frame: bytes) -> tuple[bytes, bool]:
    """What the broker sends back to ``frame`` on a connection of its own before closing it,
    and whether it closed it (within CLOSE_WAIT_S)."""
    host, _, port = side.wire.bootstrap_address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=CLOSE_WAIT_S) as sock:
        sock.sendall(frame)
        received = b""
        try:
            while chunk := sock.recv(4096):
                received += chunk
        except ConnectionError:
            return received, True
        except TimeoutError:
            return received, False
        return received, True


@pytest.mark.parametrize("name", BAD_FRAME_NAMES)
def test_a_malformed_frame_gets_what_kafka_gives_it(sides: dict[str, Side], name: str) -> None:
    """A frame that is not a valid request: Kafka closes the connection without a byte; the
    reference broker must do the same (and keep serving, which the protocol suite checks)."""
    outcomes = {kind: _after(side, _bad_frames(side.wire.version(METADATA))[name])
                for kind, side in sides.items()}
    assert outcomes["reference"] == outcomes["apache-kafka"] == (b"", True)
