"""Apache Kafka 4.x in KRaft mode as a broker kind: every node a broker and a voter of the
controller quorum (Kafka's combined mode), N of them — or N brokers and C dedicated controllers
(``ClusterSpec.controllers``, Kafka's production layout) — every link behind the network
mechanism. A node's roles follow from the listeners its wiring gives it
(:attr:`~harness.cluster.kinds.BrokerPorts.roles`).

Kafka 4 has no ZooKeeper: the controllers elect a leader among themselves with Raft over the
``__cluster_metadata`` log, and the brokers register with the active controller and fetch the
metadata from it. So a fault on the quorum is a fault on these links, and they are wired as
pair-exact as the brokers' (:mod:`harness.cluster.kinds`):

* replication: node ``j`` has one listener ``BROKER<i>`` per source node ``i``, advertised at
  the address ``i`` must use to reach it, and node ``i`` sets
  ``inter.broker.listener.name=BROKER<i>`` — as the ZooKeeper-mode kind does
  (:mod:`harness.cluster.apache_kafka`);
* the quorum: the same rule, one level down. A Kafka 4 voter reaches the leader at the endpoint
  the leader *advertises* (KIP-853) for the listener its own ``controller.listener.names``
  names first — not at the static address it was configured with, which serves only until a
  leader is known. So node ``j`` has one controller listener ``CONTROLLER<i>`` per source node
  ``i``, advertised at the address ``i`` must use to reach it, and node ``i`` names
  ``CONTROLLER<i>`` first; its ``controller.quorum.voters`` names every voter at the address *it*
  reaches that voter at (a static quorum: the voters are known by id, the addresses are each
  node's own). The Raft requests between voters and the brokers' registrations and heartbeats
  all go there, so a cut between two nodes cuts their Raft traffic with their replication.
  (Measured before this rule: with one controller listener, the followers fetched from the
  leader's own port past the proxies, and isolating the leader elected nobody.)

Storage is formatted as ``kafka-storage format`` does it (Kafka's ``StorageTool``), once per node
before its first start, all nodes with the cluster id of their kind; a restarted node finds its
metadata log where it left it. The same holds in a container (:meth:`ApacheKafkaKraftKind.
container_launch`, for the docker backend): the check and the format run in the container, on
its log-dir volume, before ``kafka.Kafka``.
"""

from __future__ import annotations

import base64
import shlex
import subprocess
import uuid
from collections.abc import Mapping
from pathlib import Path

from harness.cluster.apache_kafka import (
    CLIENT_LISTENER,
    ApacheKafkaBroker,
    KafkaDistribution,
    broker_listener,
    kafka_jvm_command,
    logging_config,
    logging_config_name,
)
from harness.cluster.errors import PeerStartError
from harness.cluster.kinds import (
    BrokerWiring,
    Capability,
    ContainerLaunch,
    ProcessRole,
    Wrap,
    properties_text,
)
from harness.net.ports import is_accepting
from harness.waiting import wait_for

FORMAT_TIMEOUT_S = 60.0
CONTAINER_LIBS = "/opt/kafka-4/libs"  # the Kafka 4 jars in the project image
KAFKA_LINE = "4"
"""The newest Kafka line with KRaft only, from the jars set-up fetched (or ``$KAFKA_HOME``)."""


def controller_listener(source: int) -> str:
    """The controller listener on which node ``source``'s Raft and controller requests arrive."""
    return f"CONTROLLER{source}"


def new_cluster_id() -> str:
    """A cluster id as ``kafka-storage random-uuid`` prints it: 16 random bytes, base64url —
    never one that starts with ``-``, which ``kafka-storage format -t`` would read as an option
    (1 id in 64 would; Kafka's own ``Uuid.randomUuid`` draws again for the same reason)."""
    while (cluster_id := base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
           ).startswith("-"):
        pass
    return cluster_id


class KraftNode(ApacheKafkaBroker):
    """One combined KRaft node (broker and controller), its storage formatted on first start."""

    name = "kafka"

    def __init__(self, run_dir: Path | str | None = None, *, cluster_id: str, **kwargs) -> None:
        super().__init__(run_dir, **kwargs)
        self.cluster_id = cluster_id

    @property
    def is_broker(self) -> bool:
        """False for a dedicated controller (``process.roles=controller``)."""
        return ProcessRole.BROKER in str(self.properties.get("process.roles", "broker"))

    def _wait_until_serving(self) -> None:
        """A broker serves once its Metadata names a broker. A dedicated controller serves no
        Metadata, only the quorum's and the brokers' requests: it is up once its listener
        accepts connections (the cluster then waits for the quorum through the brokers'
        registrations, and a restarted controller for a leader)."""
        if self.is_broker:
            super()._wait_until_serving()
            return
        wait_for(self._accepting, self.startup_timeout,
                 f"controller {self.properties.get('node.id')} to accept connections",
                 context=f"log {self.log_path}")

    def _accepting(self) -> bool:
        if not self.is_running():
            raise PeerStartError(f"{self.name} exited before it accepted connections")
        assert self.port is not None
        return is_accepting(self.host, self.port)

    def _prepare(self) -> None:
        super()._prepare()
        if (self.data_dir / "meta.properties").exists():
            return  # formatted before: a restart keeps its metadata log
        command = self.jvm_command("kafka.tools.StorageTool", "format", "-t", self.cluster_id,
                                   "-c", str(self.properties_path))
        result = subprocess.run(command, cwd=self.run_dir, capture_output=True, text=True,
                                timeout=FORMAT_TIMEOUT_S, check=False)
        if result.returncode != 0:
            raise PeerStartError(f"formatting {self.data_dir} for KRaft failed (exit code "
                                 f"{result.returncode}): {(result.stderr or result.stdout)[-800:]}")


class ApacheKafkaKraftKind:
    """``apache-kafka-kraft``: Apache Kafka 4.x nodes in combined KRaft mode (see the module
    doc). One instance makes one cluster: its nodes share its cluster id."""

    name = "apache-kafka-kraft"
    capabilities = frozenset({Capability.FAULTS, Capability.PROCESS_FAULTS,
                              Capability.CONTROLLER, Capability.QUORUM,
                              Capability.MULTI_BROKER, Capability.CREATE_TOPICS,
                              Capability.TRANSACTIONS})
    listener_per_peer = True
    controller_quorum = True
    needs_zookeeper = False
    log_name = KraftNode.name
    clean_exit_codes = frozenset({0, 143})  # a JVM stopped by SIGTERM exits 128 + 15

    def __init__(self, distribution: KafkaDistribution | None = None) -> None:
        self._distribution = distribution
        self.cluster_id = new_cluster_id()

    @property
    def distribution(self) -> KafkaDistribution:
        if self._distribution is None:
            self._distribution = KafkaDistribution.find(KAFKA_LINE)
        return self._distribution

    def version(self) -> str:
        return self.distribution.version

    def wiring_properties(self, wiring: BrokerWiring) -> dict[str, str | int]:
        me, roles = wiring.broker_id, wiring.ports.roles
        voters = sorted(wiring.voters)
        if not voters or (ProcessRole.CONTROLLER in roles
                          and not set(voters) <= set(wiring.ports.controller)):
            raise ValueError(f"node {me} of a KRaft cluster needs the address of every voter "
                             f"and, as a voter, a controller listener per node; got voters "
                             f"{dict(wiring.voters)}, controller ports "
                             f"{dict(wiring.ports.controller)}")
        brokers = sorted(wiring.ports.inbound)
        sources = sorted(wiring.ports.controller)
        listeners, advertised = [], []
        if ProcessRole.BROKER in roles:
            listeners.append(f"{CLIENT_LISTENER}://{wiring.host}:{wiring.ports.client}")
            advertised.append(f"{CLIENT_LISTENER}://{wiring.advertised_client}")
        listeners += [f"{controller_listener(i)}://{wiring.host}:{wiring.ports.controller[i]}"
                      for i in sources]
        advertised += [f"{controller_listener(i)}://{wiring.voters_dial_me[i]}" for i in sources]
        if ProcessRole.BROKER in roles:
            listeners += [f"{broker_listener(i)}://{wiring.host}:{wiring.ports.inbound[i]}"
                          for i in brokers]
            advertised += [f"{broker_listener(i)}://{wiring.dialled_at[i]}" for i in brokers]
        names = [listener.split("://")[0] for listener in listeners]
        # Its own source's listener first: the one it reaches every voter's on (a broker
        # without a controller listener of its own still names it, to dial the voters with).
        controllers = [controller_listener(me)] + [
            controller_listener(i) for i in sources if i != me]
        protocols = dict.fromkeys([*names, controller_listener(me)], "PLAINTEXT")
        properties: dict[str, str | int] = {
            "process.roles": ",".join(sorted(roles)),
            "node.id": me,
            "controller.quorum.voters": ",".join(f"{j}@{wiring.voters[j]}" for j in voters),
            "controller.listener.names": ",".join(controllers),
            "listeners": ",".join(listeners),
            "advertised.listeners": ",".join(advertised),
            "listener.security.protocol.map": ",".join(f"{name}:{protocol}"
                                                       for name, protocol in protocols.items()),
        }
        if ProcessRole.BROKER not in roles:
            return properties
        replicas = min(3, len(brokers))
        return {
            **properties,
            "inter.broker.listener.name": broker_listener(me),
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": min(2, replicas),
            # KIP-932's share-group state topic defaults to 3 replicas: fewer nodes cannot host
            # it, and share-group requests would wait for it until they time out.
            "share.coordinator.state.topic.replication.factor": replicas,
            "share.coordinator.state.topic.min.isr": min(2, replicas),
        }

    def container_launch(self, properties: Mapping[str, str | int],
                         config_dir: str) -> ContainerLaunch:
        """What :class:`KraftNode` does, in a container of the project image: format the
        node's storage as ``kafka-storage format`` does (``StorageTool``, this kind's cluster
        id) unless ``meta.properties`` is there already — a restarted container keeps its
        metadata log on its volume — then ``kafka.Kafka``. One ``sh -c``, because the check
        must run at every start of the container, not once when it is made."""
        inside = KafkaDistribution(Path(CONTAINER_LIBS), self.distribution.version)
        server = f"{config_dir}/server.properties"
        metadata_dir = str(properties.get("metadata.log.dir")
                           or str(properties["log.dirs"]).split(",")[0])
        format_storage = kafka_jvm_command("java", inside, config_dir, "kafka.tools.StorageTool",
                                           "format", "-t", self.cluster_id, "-c", server)
        run = kafka_jvm_command("java", inside, config_dir, "kafka.Kafka", server)
        script = (f"{{ test -f {shlex.quote(metadata_dir + '/meta.properties')} || "
                  f"{shlex.join(format_storage)}; }} && exec {shlex.join(run)}")
        return ContainerLaunch(
            command=("sh", "-c", script),
            files={"server.properties": properties_text({"num.partitions": 1, **properties}),
                   logging_config_name(inside.major): logging_config(inside.major)})

    def image_directories(self) -> dict[str, Path]:
        """The Kafka 4 jars (vendored, or ``$KAFKA_HOME``'s when it holds 4.x) at
        :data:`CONTAINER_LIBS`, beside the 3.9 ones the ZooKeeper-mode kind puts in the same
        image (see :meth:`ApacheKafkaKind.image_directories` for why copied); none where there
        are none."""
        try:
            return {CONTAINER_LIBS: self.distribution.libs}
        except PeerStartError:
            return {}

    def new_broker(self, run_dir: Path, *, port: int, properties: Mapping[str, str | int],
                   startup_timeout: float, stop_timeout: float,
                   wrap: Wrap | None = None) -> KraftNode:
        cls: type[KraftNode] = wrap(KraftNode) if wrap else KraftNode
        return cls(run_dir, port=port, properties=properties, distribution=self.distribution,
                   cluster_id=self.cluster_id, startup_timeout=startup_timeout,
                   stop_timeout=stop_timeout)
