"""Which consumer group protocol the workload's group consumers speak, and what each one costs.

Kafka has two: the ``classic`` one (JoinGroup/SyncGroup/Heartbeat, a leader member computes the
assignment, every member shares the group's *generation*) and KIP-848's ``consumer`` one
(ConsumerGroupHeartbeat only, the coordinator assigns, and each member has its own *member
epoch*, bumped as it reaches a new target assignment). The choice changes what a history's
``generation`` column holds and which exclusivity rule the checker applies (docs/history.md),
so it is recorded on every group row (the ``group_protocol`` column).

Kept apart from the consumer, which loads librdkafka: the CLI's option and the runner's checks
name the choice without loading a client library.
"""

from __future__ import annotations

from enum import StrEnum


class GroupProtocol(StrEnum):
    """librdkafka's ``group.protocol``; the values are the history's ``group_protocol`` column
    (harness.history.GROUP_PROTOCOLS)."""

    CLASSIC = "classic"
    CONSUMER = "consumer"


CONSUMER_GROUP_HEARTBEAT = 68
"""The API key of ConsumerGroupHeartbeat: a broker that does not offer it in ApiVersions has no
KIP-848 coordinator, and a consumer of the consumer protocol could never join its group."""

CLASSIC_ONLY = frozenset({
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "partition.assignment.strategy",
    "group.protocol.type",
})
"""Consumer properties librdkafka 2.16 refuses to create a consumer with under
``group.protocol=consumer`` (measured: ``_INVALID_ARG``, "not supported for
group.protocol=consumer"). The first two are the broker's under KIP-848
(``group.consumer.session.timeout.ms``, 45 s by default, and
``group.consumer.heartbeat.interval.ms``), the assignor is the coordinator's
(``group.remote.assignor`` names one)."""
