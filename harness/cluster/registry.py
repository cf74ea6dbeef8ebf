"""Which broker kinds exist: the target names users type and the kinds the harness runs itself.

One table, read by the factory (:mod:`harness.cluster.factory`, which combines a kind with a
backend and a network mechanism) and by the docker image build (which carries what each kind's
nodes need), so neither has to ask the other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.cluster.kinds import BrokerKind


class TargetName(StrEnum):
    """What the suites or a run talk to (``--target``)."""

    REFERENCE = "reference"
    APACHE_KAFKA = "apache-kafka"
    APACHE_KAFKA_KRAFT = "apache-kafka-kraft"
    TANSU = "tansu"
    LIBRDKAFKA_MOCK = "librdkafka-mock"
    EXTERNAL = "external"
    RECIPE = "recipe"  # a broker kind described in a recipe file (harness/cluster/recipe.py)


class ClusterTarget(StrEnum):
    """The targets the harness runs as a ZooKeeper-mode cluster of its own, with every fault
    (the choices of ``kafka-harness run --target``)."""

    REFERENCE = TargetName.REFERENCE.value
    APACHE_KAFKA = TargetName.APACHE_KAFKA.value


def _reference() -> BrokerKind:
    from harness.cluster.reference_kind import REFERENCE

    return REFERENCE


def _apache_kafka() -> BrokerKind:
    from harness.cluster.apache_kafka import ApacheKafkaKind

    return ApacheKafkaKind()


BROKER_KINDS: Mapping[str, Callable[[], BrokerKind]] = {
    ClusterTarget.REFERENCE: _reference,
    ClusterTarget.APACHE_KAFKA: _apache_kafka,
}
"""How each :class:`ClusterTarget` makes its broker kind (imported on use: the CLI starts
without loading any client library)."""

DOCKER_KINDS = frozenset({TargetName.REFERENCE, TargetName.APACHE_KAFKA})
"""Kinds the docker backend has an image for."""
