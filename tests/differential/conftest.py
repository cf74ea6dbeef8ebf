"""The two brokers every differential test compares, started once for the whole directory: a
one-broker ZooKeeper-mode cluster of Apache Kafka 3.9 and of the reference broker, the same
configuration, the same topic."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from .sides import SAME_NAMES, Side, make_side


@pytest.fixture(scope="session")
def sides(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Side]]:
    made: dict[str, Side] = {}
    try:
        for kind in ("apache-kafka", "reference"):
            made[kind] = make_side(kind, tmp_path_factory.mktemp(kind))
        for side in made.values():
            admin = AdminClient({"bootstrap.servers": side.target.bootstrap})
            admin.create_topics([NewTopic(SAME_NAMES, 1, 1)])[SAME_NAMES].result(30)
            side.wire.wait_known_everywhere(SAME_NAMES)
        yield made
    finally:
        for side in made.values():
            side.clients.close()
            side.target.close()
