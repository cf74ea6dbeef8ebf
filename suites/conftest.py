"""Fixtures every suite shares, on top of the kafka-harness pytest plugin's.

The plugin gives the target (``kafka_target``), ``kafka_faults``, ``kafka_admin``,
``kafka_producer``, ``kafka_consumer``, ``kafka_raw_client`` and ``kafka_names``. This adds
``make_topic``: a topic of the test's own (unique name, so tests never see each other's records
on the session's one target), created with CreateTopics where the target implements it,
otherwise by auto-creation — and a precise skip when the target cannot give the
partition count the test needs.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from harness.cluster.kinds import Capability
from harness.cluster.targets import Target
from harness.plugin.options import kafka_options

from .support import unique_name, wait_for_topic


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A long chaos run outlasts pytest-timeout's default: give it its duration plus set-up,
    heal, final read and check."""
    if not config.pluginmanager.hasplugin("timeout"):
        return
    budget = kafka_options(config).chaos_long_duration_s + 600
    for item in items:
        if item.get_closest_marker("chaos_long") is not None:
            item.add_marker(pytest.mark.timeout(budget))


@pytest.fixture
def make_topic(request: pytest.FixtureRequest, kafka_target: Target,
               kafka_admin: AdminClient) -> Callable[..., str]:
    """``make_topic(partitions=1, replication_factor=None, config=None, exact=True) -> name``.

    ``replication_factor`` None is the target's default (every broker, up to 3). With
    ``exact=False`` a target that can only auto-create topics may give a different partition
    count (read it from metadata); with ``exact=True`` (default) such a target skips the test.
    """
    def make(partitions: int = 1, replication_factor: int | None = None,
             config: dict[str, str] | None = None, exact: bool = True) -> str:
        topic = unique_name(request)
        if kafka_target.missing(Capability.CREATE_TOPICS) is None:
            replicas = replication_factor or min(3, kafka_target.brokers)
            futures = kafka_admin.create_topics(
                [NewTopic(topic, partitions, replicas, config=config or {})],
                operation_timeout=30)
            futures[topic].result(60)
            wait_for_topic(kafka_admin, topic, partitions)
            return topic
        if config:
            pytest.skip(f"needs topic configs {sorted(config)}: "
                        f"{kafka_target.missing(Capability.CREATE_TOPICS)}")
        auto = Producer({"bootstrap.servers": kafka_target.bootstrap})
        try:
            auto.list_topics(topic=topic, timeout=10)
        finally:
            auto.flush(5)
        got = wait_for_topic(kafka_admin, topic, None)
        if exact and got != partitions:
            pytest.skip(f"needs a topic with exactly {partitions} partition(s); "
                        f"{kafka_target.missing(Capability.CREATE_TOPICS)} and auto-creation "
                        f"gave {got}")
        return topic

    return make
