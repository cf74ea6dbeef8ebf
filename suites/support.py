"""Small helpers the suites share: unique names and waiting for a topic to be served."""

from __future__ import annotations

import time
from typing import Any

import pytest

from harness.plugin.options import kafka_options
from harness.plugin.pytest_plugin import new_name

TOPIC_READY_TIMEOUT_S = 30.0


def unique_name(request: pytest.FixtureRequest, kind: str = "") -> str:
    """A Kafka-legal name unique to this test, under the session's prefix (so the plugin can
    delete it from a shared broker afterwards): the kind, the test's name, a random suffix."""
    return new_name(request, kind.rstrip("-"))


def _partitions_with_leaders(admin: Any, topic: str) -> int | None:
    metadata = admin.list_topics(topic=topic, timeout=5)
    described = metadata.topics.get(topic)
    if described is None or described.error is not None:
        return None
    if any(p.leader < 0 for p in described.partitions.values()):
        return None
    return len(described.partitions)


def wait_for_topic(admin: Any, topic: str, partitions: int | None,
                   timeout: float = TOPIC_READY_TIMEOUT_S) -> int:
    """Wait until Metadata shows `topic` with a leader for each partition; its partition count."""
    deadline = time.monotonic() + timeout
    seen: int | None = None
    while time.monotonic() < deadline:
        seen = _partitions_with_leaders(admin, topic)
        if seen is not None and (partitions is None or seen >= partitions):
            return seen
        time.sleep(0.1)
    raise AssertionError(f"topic {topic!r} not ready within {timeout:.0f} s "
                         f"(partitions with leaders: {seen}, wanted {partitions})")


def own_cluster_options(cluster: Any, request: pytest.FixtureRequest) -> dict[str, Any]:
    """RunOptions fields for a run that starts a cluster of its own like the session's target:
    the same broker kind, network mechanism and backend (the chaos and replication suites
    fault and cut their cluster's logs, which the shared target must not inherit)."""
    options = kafka_options(request.config)
    return {"target": cluster.kind, "network": options.network, "backend": options.backend,
            "recipe": str(options.recipe) if options.recipe else None}
