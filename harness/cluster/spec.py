"""What cluster to run, as plain data: how many brokers, their settings, their disks.

Its own module because everything that describes a cluster — a CLI flag, the supervisor's
command line, a test, a backend — needs it, and none of them should have to load a backend
(and the clients it imports) to say how many brokers it wants.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from harness.disk.broker_disk import DEFAULT_SIZE_MB, DiskLayer

# Kafka's own defaults where they only make a test wait: a broker stopping while it still leads
# partitions that cannot move retries its controlled shutdown every 5 s, three times.
TEST_FRIENDLY_DEFAULTS: Mapping[str, str | int] = {
    "controlled.shutdown.retry.backoff.ms": 500,
}



@dataclass(frozen=True)
class ClusterSpec:
    """What cluster to run: plain data, so a test or a CLI flag can describe it.

    ``default_replication_factor`` ``None`` means ``min(3, brokers)``, like
    ``offsets.topic.replication.factor``. ``properties`` apply to every broker (after the keys
    this spec sets, so they may override them); ``broker_properties[id]`` apply to one broker last.
    """

    brokers: int = 3
    controllers: int = 0
    """Dedicated KRaft controllers (Kafka's production layout), node ids after the brokers'
    (``brokers + 1`` …); 0 means every broker is a voter too (combined mode). A kind without
    a controller quorum refuses any."""
    # How long a silent broker stays registered: ZooKeeper's session timeout, and on a KRaft
    # cluster the controllers' broker.session.timeout.ms (the name is from ZooKeeper mode).
    zookeeper_session_timeout_ms: int = 6000
    unclean_election_interval_ms: int = 1000
    """How often a KRaft controller elects an out-of-sync replica for the leaderless partitions
    of topics with unclean election on (``unclean.leader.election.interval.ms``; Kafka's own
    default is 5 minutes). That check is the only way a KRaft controller acts on the setting
    turned on at runtime, where ZooKeeper's controller elects on the config change itself: a
    test cluster that waited minutes for it could not test the change."""
    default_replication_factor: int | None = None
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    properties: Mapping[str, str | int] = field(default_factory=dict)
    broker_properties: Mapping[int, Mapping[str, str | int]] = field(default_factory=dict)
    startup_timeout: float = 60.0
    broker_stop_timeout: float = 20.0
    disk: DiskLayer = DiskLayer.NONE  # what each broker's log dir sits on (disk faults)
    disk_size_mb: int = DEFAULT_SIZE_MB

    def __post_init__(self) -> None:
        if self.brokers < 1:
            raise ValueError(f"brokers must be >= 1, got {self.brokers}")
        if self.controllers < 0:
            raise ValueError(f"controllers must be >= 0, got {self.controllers}")
        if self.zookeeper_session_timeout_ms < 1:
            raise ValueError("zookeeper_session_timeout_ms must be >= 1, got "
                             f"{self.zookeeper_session_timeout_ms}")
        unknown = sorted(set(self.broker_properties) - set(self.node_ids))
        if unknown:
            raise ValueError(f"broker_properties names unknown node ids {unknown}; "
                             f"node ids are {self.node_ids[0]}..{self.node_ids[-1]}")

    @property
    def broker_ids(self) -> list[int]:
        return list(range(1, self.brokers + 1))

    @property
    def controller_ids(self) -> list[int]:
        """The dedicated controllers' node ids: after the brokers', so every id is one node's."""
        return list(range(self.brokers + 1, self.brokers + self.controllers + 1))

    @property
    def voter_ids(self) -> list[int]:
        """The nodes of a KRaft quorum: the dedicated controllers, else every broker."""
        return self.controller_ids or self.broker_ids

    @property
    def node_ids(self) -> list[int]:
        """Every process node's id: the brokers, then the dedicated controllers."""
        return self.broker_ids + self.controller_ids

    def node_name(self, node_id: int) -> str:
        """What users and links call a node: ``broker-<id>`` or ``controller-<id>``."""
        if node_id in self.controller_ids:
            return f"controller-{node_id}"
        return f"broker-{node_id}"

    def server_properties(self, broker_id: int, zookeeper_connect: str,
                          wiring: Mapping[str, str | int] | None = None) -> dict[str, str | int]:
        """The properties one broker gets on top of its process's own defaults: this spec's
        keys, then ``properties``, then the kind's ``wiring`` keys (listeners, peers,
        ZooKeeper), then ``broker_properties[broker_id]``."""
        replication = min(3, self.brokers)
        # The session is how long a silent broker stays registered: ZooKeeper's session, or on
        # a cluster without ZooKeeper (KRaft) the controllers' broker.session.timeout.ms.
        zookeeper: dict[str, str | int] = {
            "zookeeper.connect": zookeeper_connect,
            "zookeeper.session.timeout.ms": self.zookeeper_session_timeout_ms,
        } if zookeeper_connect else {
            "broker.session.timeout.ms": self.zookeeper_session_timeout_ms,
            "unclean.leader.election.interval.ms": self.unclean_election_interval_ms}
        merged: dict[str, str | int] = {
            **TEST_FRIENDLY_DEFAULTS,
            "broker.id": broker_id,
            **zookeeper,
            "offsets.topic.replication.factor": replication,
            "default.replication.factor": self.default_replication_factor or replication,
            "min.insync.replicas": self.min_insync_replicas,
            "unclean.leader.election.enable": str(self.unclean_leader_election_enable).lower(),
            **self.properties,
            **(wiring or {}),
            **self.broker_properties.get(broker_id, {}),
        }
        return merged
