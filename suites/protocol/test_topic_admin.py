"""CreateTopics and DeleteTopics in ZooKeeper mode: when the answer comes, and what it says.

Kafka's ZooKeeper-mode broker writes the request to ZooKeeper (the topic's assignment, or
``/admin/delete_topics/<topic>``) and parks it in its topic purgatory until its own metadata
shows the outcome — the new topic's leaders, the deleted topic's absence — or the request's
``timeout_ms`` runs out. A client that deletes a topic and then recreates it, or checks it is
gone, relies on that: an answer before the deletion means a CreateTopics right after it fails
with TOPIC_ALREADY_EXISTS. With ``timeout_ms`` <= 0 the change is made and the answer does not
wait: REQUEST_TIMED_OUT (librdkafka hides that code from an operation_timeout 0 caller).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from harness.raw_client import RawClient
from harness.waiting import wait_for

from ..support import unique_name
from ._wire import METADATA, ZERO_UUID, Wire

CREATE_TOPICS, DELETE_TOPICS = 19, 20
NONE, UNKNOWN_TOPIC_OR_PARTITION, REQUEST_TIMED_OUT = 0, 3, 7
TIMEOUT_MS = 30_000


def _delete_body(version: int, topic: str, timeout_ms: int) -> dict[str, Any]:
    """v6 names topics as (name, topic id) pairs; earlier versions as a list of names."""
    if version >= 6:
        return {"topics": [{"name": topic, "topic_id": ZERO_UUID}], "timeout": timeout_ms}
    return {"topic_names": [topic], "timeout": timeout_ms}


def _described(wire: Wire, client: RawClient, topic: str) -> Any:
    """What ``client``'s broker's Metadata says of ``topic``."""
    return client.request(METADATA, wire.version(METADATA), {
        "topics": [{"name": topic, "topic_id": ZERO_UUID}],
        "allow_auto_topic_creation": False}).topics


@pytest.mark.requires_zookeeper
@pytest.mark.requires_create_topics
def test_delete_topics_answers_once_the_answering_broker_has_forgotten_the_topic(
        wire: Wire, new_topic: Callable[..., str]) -> None:
    """A DeleteTopics with a timeout is answered NONE only after the topic is gone from the answering broker's metadata [Kafka ZkAdminManager.deleteTopics, DelayedDeleteTopics; protocol guide, DeleteTopics timeout_ms]."""  # noqa: E501
    topic = new_topic(partitions=3)
    controller = wire.controller()
    version = wire.version(DELETE_TOPICS)
    response = controller.request(DELETE_TOPICS, version,
                                  _delete_body(version, topic, TIMEOUT_MS))
    (result,) = response.responses
    assert (result.name, result.error_code.value) == (topic, NONE), result
    (described,) = _described(wire, controller, topic)
    assert described.error_code.value == UNKNOWN_TOPIC_OR_PARTITION, described


@pytest.mark.requires_zookeeper
@pytest.mark.requires_create_topics
def test_delete_topics_with_no_timeout_asks_for_the_deletion_and_answers_timed_out(
        wire: Wire, new_topic: Callable[..., str]) -> None:
    """A DeleteTopics with timeout_ms 0 starts the deletion but does not wait for it: the topic is answered REQUEST_TIMED_OUT, and is then deleted all the same [Kafka ZkAdminManager.deleteTopics: timeout <= 0 answers at once; protocol guide, DeleteTopics timeout_ms]."""  # noqa: E501
    topic = new_topic()
    controller = wire.controller()
    version = wire.version(DELETE_TOPICS)
    response = controller.request(DELETE_TOPICS, version, _delete_body(version, topic, 0))
    (result,) = response.responses
    assert (result.name, result.error_code.value) == (topic, REQUEST_TIMED_OUT), result

    def gone() -> bool:
        (described,) = _described(wire, controller, topic)
        return described.error_code.value == UNKNOWN_TOPIC_OR_PARTITION

    wait_for(gone, TIMEOUT_MS / 1000, f"{topic} to be deleted after DeleteTopics(timeout 0)")


@pytest.mark.requires_zookeeper
@pytest.mark.requires_create_topics
def test_create_topics_with_no_timeout_creates_and_answers_timed_out(
        request: pytest.FixtureRequest, wire: Wire, make_topic: Callable[..., str]) -> None:
    """A CreateTopics with timeout_ms 0 creates the topic but does not wait for its leaders: it is answered REQUEST_TIMED_OUT, and the topic then exists all the same [Kafka ZkAdminManager.createTopics: timeout <= 0 answers at once; protocol guide, CreateTopics timeout_ms]."""  # noqa: E501
    topic = unique_name(request)
    controller = wire.controller()
    response = controller.request(CREATE_TOPICS, wire.version(CREATE_TOPICS), {
        "topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1,
                    "assignments": [], "configs": []}],
        "timeout": 0, "validate_only": False})
    (result,) = response.topics
    assert (result.name, result.error_code.value) == (topic, REQUEST_TIMED_OUT), result

    def led() -> bool:
        (described,) = _described(wire, controller, topic)
        return described.error_code.value == NONE and all(
            p.leader_id >= 0 for p in described.partitions)

    wait_for(led, TIMEOUT_MS / 1000, f"{topic} to be created after CreateTopics(timeout 0)")
