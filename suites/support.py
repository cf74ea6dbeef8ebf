"""Small helpers the suites share: unique names, waiting for a topic to be served, producing
records that must all arrive."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient

from harness.plugin.options import kafka_options
from harness.plugin.pytest_plugin import new_name
from harness.waiting import wait_for

TOPIC_READY_TIMEOUT_S = 30.0


def unique_name(request: pytest.FixtureRequest, kind: str = "") -> str:
    """A Kafka-legal name unique to this test, under the session's prefix (so the plugin can
    delete it from a shared broker afterwards): the kind, the test's name, a random suffix."""
    return new_name(request, kind.rstrip("-"))


def _partitions_with_leaders(admin: AdminClient, topic: str) -> int | None:
    metadata = admin.list_topics(topic=topic, timeout=5)
    described = metadata.topics.get(topic)
    if described is None or described.error is not None:
        return None
    if any(p.leader < 0 for p in described.partitions.values()):
        return None
    return len(described.partitions)


def wait_for_topic(admin: AdminClient, topic: str, partitions: int | None,
                   timeout: float = TOPIC_READY_TIMEOUT_S) -> int:
    """Wait until Metadata shows `topic` with a leader for each partition (at least
    `partitions` of them, if given); its partition count. A Metadata request that fails (a
    broker restarting) counts as not yet."""
    def ready() -> int | None:
        seen = _partitions_with_leaders(admin, topic)
        return seen if seen is not None and (partitions is None or seen >= partitions) else None

    return wait_for(ready, timeout,
                    f"topic {topic!r} with a leader for each of {partitions or 'its'} partitions")


def own_cluster_options(cluster: Any, request: pytest.FixtureRequest) -> dict[str, Any]:
    """RunOptions fields for a run that starts a cluster of its own like the session's target:
    the same broker kind, network mechanism and backend (the chaos and replication suites
    fault and cut their cluster's logs, which the shared target must not inherit)."""
    options = kafka_options(request.config)
    return {"target": cluster.kind, "network": options.network, "backend": options.backend,
            "recipe": str(options.recipe) if options.recipe else None}


def produce_all(producer: Producer, topic: str, values: list[bytes], **options: Any) -> None:
    """Produce `values` in order and fail on any delivery error: flush() returning 0 only
    says nothing is queued, and a record can fail (an unknown partition) and leave the queue."""
    failed: list[str] = []

    def delivered(error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            failed.append(str(error))

    for value in values:
        producer.produce(topic, value, on_delivery=delivered, **options)
    assert producer.flush(30) == 0, f"records to {topic} still queued after 30 s"
    assert failed == [], f"records to {topic} not delivered: {failed}"
