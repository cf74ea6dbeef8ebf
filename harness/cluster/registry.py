"""Which broker kind each built-in cluster target runs: one table.

Read by the factory (:mod:`harness.cluster.factory`, which combines a kind with a backend and a
network mechanism) and by the docker image build (which carries what each kind's nodes need),
so neither has to ask the other. The target names themselves are plain data in
:mod:`harness.cluster.options`, which whoever only parses options imports instead of this.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from harness.cluster.apache_kafka import ApacheKafkaKind
from harness.cluster.kinds import BrokerKind
from harness.cluster.kraft import ApacheKafkaKraftKind
from harness.cluster.options import ClusterTarget
from harness.cluster.reference_kind import REFERENCE

BROKER_KINDS: Mapping[str, Callable[[], BrokerKind]] = {
    ClusterTarget.REFERENCE: lambda: REFERENCE,
    ClusterTarget.APACHE_KAFKA: ApacheKafkaKind,
    ClusterTarget.APACHE_KAFKA_KRAFT: ApacheKafkaKraftKind,
}
"""How each :class:`~harness.cluster.options.ClusterTarget` makes its broker kind (a new Apache
Kafka kind finds its jars when made)."""
