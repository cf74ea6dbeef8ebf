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
from typing import Any

import pytest

from harness.wire import protocol
from suites.protocol._exchange import exchange
from suites.protocol._samples import SAMPLES
from suites.protocol._wire import METADATA, encodable_versions
from suites.protocol.test_malformed_frames import BAD_FRAME_NAMES, CLOSE_WAIT_S, _bad_frames
from tests import kafka_api_versions

from .sides import SAME_NAMES, Side, comparable, differences

LIST_GROUPS = 16


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
    sample = SAMPLES[api_key]
    # Up to the sample's client version, as the round-trip test: above it is a request only
    # brokers send (AddPartitionsToTxn v4+), which Kafka leaves unanswered for a client's body.
    versions = sorted(v for v in set(encodable_versions(kafka.wire.advertised, api_key))
                      & set(encodable_versions(reference.wire.advertised, api_key))
                      if sample.client_max_version is None or v <= sample.client_max_version)
    if not versions:
        pytest.skip(f"{protocol.api_name(api_key)} is not advertised by both at a common "
                    f"version (Kafka {kafka.wire.advertised.get(api_key)}, reference "
                    f"{reference.wire.advertised.get(api_key)})")
    found = []
    for version in versions:
        answers = {}
        for name, side in sides.items():
            names = side.names(SAME_NAMES, version)
            _, frame = exchange(side.wire, api_key, version, sample, names)
            _, body = protocol.decode_response(api_key, version, frame)
            answers[name] = own_groups(api_key, comparable(protocol.to_plain(body)))
        found += [f"v{version}{d}" for d in differences(answers["reference"],
                                                        answers["apache-kafka"])]
    assert not found, "the reference broker answered differently:\n" + "\n".join(found)


def own_groups(api_key: int, answer: Any) -> Any:
    """A ListGroups answer with only the groups this module's samples made: the brokers serve
    the whole directory, and the groups other tests leave behind (test_group_states.py's, on
    their own timeouts) are theirs to compare."""
    if api_key == LIST_GROUPS:
        answer["groups"] = [g for g in answer["groups"] if g["group_id"].startswith(SAME_NAMES)]
    return answer


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
