"""Exact error codes for bad input to Produce, ListOffsets and Metadata — and nothing appended.

The ApiVersions answer to an unsupported version (UNSUPPORTED_VERSION, KIP-511) is checked in
test_api_versions; an unsupported version of any other API closes the connection
(test_malformed_frames).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest

from harness.wire.records import build_batch

from ..support import unique_name
from ._wire import (
    LIST_OFFSETS,
    METADATA,
    PRODUCE,
    Wire,
    encodable_versions,
    list_offsets_body,
    produce_body,
)

CORRUPT_MESSAGE, UNKNOWN_TOPIC_OR_PARTITION, MESSAGE_TOO_LARGE = 2, 3, 10
INVALID_REQUIRED_ACKS, UNKNOWN_TOPIC_ID = 21, 100
LATEST = -1
MAX_MESSAGE_BYTES = 2048


def _log_end_offset(wire: Wire, topic: str, partition: int = 0) -> int:
    answer = wire.list_offset(topic, LATEST, partition)
    assert answer.error_code.value == 0, answer
    return answer.offset


def _by_name_version(wire: Wire, api_key: int) -> int:
    """The highest version that names topics (Produce v13 and Fetch v13 use topic ids)."""
    usable = [v for v in encodable_versions(wire.advertised, api_key) if v < 13]
    if not usable:
        pytest.skip(f"no version of API {api_key} below 13 is advertised")
    return usable[-1]


def test_produce_to_unknown_topic(request: pytest.FixtureRequest, wire: Wire) -> None:
    """A Produce to a topic that does not exist is refused with UNKNOWN_TOPIC_OR_PARTITION [protocol guide, Produce; Kafka ReplicaManager.appendRecords]."""  # noqa: E501
    missing = unique_name(request, "missing-")
    response = wire.bootstrap.request(PRODUCE, _by_name_version(wire, PRODUCE), produce_body(
        missing, build_batch([(None, b"x")])))
    (partition,) = response.responses[0].partition_responses
    assert partition.error_code.value == UNKNOWN_TOPIC_OR_PARTITION, partition


def test_produce_to_unknown_topic_id(wire: Wire) -> None:
    """A Produce naming a topic id no topic has is refused with UNKNOWN_TOPIC_ID [KIP-516; protocol guide, Produce v13]."""  # noqa: E501
    version = wire.version(PRODUCE, at_least=13)
    response = wire.bootstrap.request(PRODUCE, version, produce_body(
        "", build_batch([(None, b"x")]), topic_id=uuid.uuid4()))
    (partition,) = response.responses[0].partition_responses
    assert partition.error_code.value == UNKNOWN_TOPIC_ID, partition


def test_metadata_for_unknown_topic_without_auto_creation(request: pytest.FixtureRequest,
                                                          wire: Wire) -> None:
    """Metadata for a missing topic with allow_auto_topic_creation=false answers UNKNOWN_TOPIC_OR_PARTITION [KIP-204; protocol guide, Metadata v4+]."""  # noqa: E501
    version = wire.version(METADATA, at_least=4)
    missing = unique_name(request, "missing-")
    response = wire.bootstrap.request(METADATA, version, {
        "topics": [{"name": missing}], "allow_auto_topic_creation": False})
    (described,) = response.topics
    assert described.error_code.value == UNKNOWN_TOPIC_OR_PARTITION, described


def test_produce_and_list_offsets_to_invalid_partition(wire: Wire,
                                                       new_topic: Callable[..., str]) -> None:
    """A partition index the topic does not have is answered UNKNOWN_TOPIC_OR_PARTITION [protocol guide, Produce and ListOffsets]."""  # noqa: E501
    topic = new_topic(1, exact=False)
    count = len(wire.metadata(topic).topics[0].partitions)
    leader = wire.leader(topic)
    response = leader.request(PRODUCE, _by_name_version(wire, PRODUCE), produce_body(
        topic, build_batch([(None, b"x")]), partition=count + 5))
    assert response.responses[0].partition_responses[0].error_code.value == \
        UNKNOWN_TOPIC_OR_PARTITION
    answer = leader.request(LIST_OFFSETS, wire.version(LIST_OFFSETS, at_least=1),
                            list_offsets_body(topic, LATEST, partition=count + 5))
    assert answer.topics[0].partitions[0].error_code.value == UNKNOWN_TOPIC_OR_PARTITION


def test_batch_with_bad_crc_is_corrupt_message(wire: Wire, new_topic: Callable[..., str]) -> None:
    """A record batch whose CRC-32C does not match is refused with CORRUPT_MESSAGE and not appended [protocol guide, Record batch; Kafka LogValidator]."""  # noqa: E501
    topic = new_topic(1, exact=False)
    damaged = bytearray(build_batch([(b"k", b"value")]))
    damaged[-1] ^= 0x01  # inside the records, covered by the CRC
    answer = wire.produce(topic, bytes(damaged))
    assert answer.error_code.value == CORRUPT_MESSAGE, answer
    assert _log_end_offset(wire, topic) == 0


def test_batch_above_max_message_bytes_is_message_too_large(
        wire: Wire, new_topic: Callable[..., str]) -> None:
    """A batch larger than the topic's max.message.bytes is refused with MESSAGE_TOO_LARGE and not appended [Kafka topic config max.message.bytes; protocol guide, Produce]."""  # noqa: E501
    topic = new_topic(1, config={"max.message.bytes": str(MAX_MESSAGE_BYTES)})
    answer = wire.produce(topic, build_batch([(None, b"x" * (MAX_MESSAGE_BYTES * 2))]))
    assert answer.error_code.value == MESSAGE_TOO_LARGE, answer
    fits = wire.produce(topic, build_batch([(None, b"x" * (MAX_MESSAGE_BYTES // 2))]))
    assert (fits.error_code.value, fits.base_offset) == (0, 0)


@pytest.mark.parametrize("acks", [2, -2, 5])
def test_invalid_acks_is_invalid_required_acks(wire: Wire, new_topic: Callable[..., str],
                                               acks: int) -> None:
    """A Produce with acks other than 0, 1 or -1 is refused with INVALID_REQUIRED_ACKS and not appended [protocol guide, Produce; KIP-1]."""  # noqa: E501
    topic = new_topic(1, exact=False)
    answer = wire.produce(topic, build_batch([(None, b"x")]), acks=acks)
    assert answer.error_code.value == INVALID_REQUIRED_ACKS, answer
    assert _log_end_offset(wire, topic) == 0
