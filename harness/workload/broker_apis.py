"""Whether a cluster's brokers offer what the workload's consumers will ask of them.

Consumers of KIP-848's consumer group protocol talk to their group's coordinator with
ConsumerGroupHeartbeat only. A broker without it (Kafka 3.x, most peers) answers nothing they
can use, and librdkafka makes that a fatal error of the client in the middle of the run; asking
each broker's ApiVersions once the cluster is up turns it into a refusal before the run starts.
Apart from :mod:`harness.workload.group_protocol`, which the CLI imports: this one loads the raw
client and its protocol schemas.
"""

from __future__ import annotations

from collections.abc import Iterable

from harness.raw_client import RawClient
from harness.workload.group_protocol import CONSUMER_GROUP_HEARTBEAT


def lacking_consumer_protocol(brokers: Iterable[tuple[int, str, int]], *,
                              timeout: float = 10.0) -> list[int]:
    """The ids of the (id, host, port) brokers whose ApiVersions does not list
    ConsumerGroupHeartbeat: every broker counts, since any may become the group's coordinator.
    OSError or RuntimeError when one cannot be asked."""
    lacking = []
    for broker_id, host, port in brokers:
        with RawClient(host, port, timeout=timeout) as client:
            if CONSUMER_GROUP_HEARTBEAT not in client.advertised():
                lacking.append(broker_id)
    return lacking
