"""The local cluster with every node in its own network namespace, for kernel-level partitions.

Where :class:`~harness.cluster.proxied.ProxiedCluster` cuts links in user space (Toxiproxy),
this backend gives ZooKeeper and each broker a namespace and an address of its own on a private
bridge (:class:`~harness.net.netns.NetnsNetwork`), so a partition is what Jepsen and Kafka's
Trogdor make it: iptables dropping the packets of the nodes a receiver holds a grudge against.
It needs root. Clients run in the root namespace and reach the brokers through the bridge.

:class:`KernelFaults` has the partition half of the API of
:class:`~harness.cluster.proxy_faults.NetworkFaults` over it, the node ``client`` included: the
client is the host, so its packets are dropped inside the brokers' namespaces (from and to the
bridge's address), never in the host's own firewall. As with the proxies, nothing is cut between
the client and ZooKeeper — the harness reads ZooKeeper from the host, and no Kafka client talks
to it. Toxics (latency, bandwidth, ...) need the proxies and are refused with that reason.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from harness.cluster.kinds import BrokerKind, BrokerNodeProcess
from harness.cluster.local import LocalCluster
from harness.cluster.reference_kind import REFERENCE
from harness.cluster.spec import ClusterSpec
from harness.cluster.zookeeper import ZooKeeperServer
from harness.net import grudge as shapes
from harness.net.netns import NetnsNetwork
from harness.net.partition_shapes import PartitionShapes

ZOOKEEPER = "zk"
CLIENT = "client"
NO_TOXICS = ("toxics (latency, bandwidth, ...) need the proxy network mechanism "
             "(--network proxy); the kernel mechanism only drops packets")


def _in_namespace(cls: type, net: NetnsNetwork, node: str) -> type:
    """``cls`` (a ManagedProcess) running inside ``node``'s namespace, on its address."""

    class InNamespace(cls):
        @property
        def host(self) -> str:
            return net.ip(node)

        def _command(self) -> list[str]:
            return net.command(node, super()._command())

    InNamespace.__name__ = f"{cls.__name__}InNamespace"
    return InNamespace


class NetnsCluster(LocalCluster):
    """ZooKeeper and N brokers, each in a network namespace on one private bridge."""

    def __init__(self, spec: ClusterSpec | None = None, run_dir: Path | str | None = None,
                 *, prefix: str = "kh", kind: BrokerKind = REFERENCE) -> None:
        super().__init__(spec, run_dir, kind=kind)
        self._prefix = prefix
        self.net: NetnsNetwork | None = None

    @property
    def nodes(self) -> list[str]:
        """The nodes with a namespace: ZooKeeper and the brokers."""
        return [ZOOKEEPER, *(f"broker-{b}" for b in self.spec.broker_ids)]

    @property
    def cluster(self) -> NetnsCluster:
        """The cluster itself: what :attr:`ProxiedCluster.cluster` is for the proxied backend,
        so callers reach the processes and ZooKeeper the same way on both."""
        return self

    def namespaces(self) -> dict[str, str]:
        """Node -> its network namespace (empty once stopped)."""
        net = self.net
        return {} if net is None else {node: net.namespace(node) for node in net.nodes}

    def addresses(self) -> dict[str, str]:
        """Node -> its address on the bridge (empty once stopped)."""
        return {} if self.net is None else dict(self.net.nodes)

    def start(self) -> NetnsCluster:
        self.net = NetnsNetwork(self._prefix)
        try:
            for node in self.nodes:
                self.net.add_node(node)
            super().start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Heal first (as ProxiedCluster lifts its faults) so the brokers can shut down in
        order, stop every process, then remove the namespaces, rules and bridge."""
        if self.net is not None:
            with contextlib.suppress(Exception):  # a failed heal must not block the stop
                self.net.heal()
        try:
            super().stop()
        finally:
            if self.net is not None:
                net, self.net = self.net, None
                net.close()

    def _new_zookeeper(self, run_dir: Path, port: int | None) -> ZooKeeperServer:
        assert self.net is not None
        cls = _in_namespace(ZooKeeperServer, self.net, ZOOKEEPER)
        return cls(run_dir, port=port or 2181, startup_timeout=self.spec.startup_timeout)

    def _broker_host(self, broker_id: int) -> str:
        assert self.net is not None
        return self.net.ip(f"broker-{broker_id}")

    def _new_broker(self, broker_id: int, run_dir: Path, port: int,
                    properties: Mapping[str, str | int]) -> BrokerNodeProcess:
        net = self.net
        assert net is not None
        return self.kind.new_broker(
            run_dir, port=port, properties=properties,
            startup_timeout=self.spec.startup_timeout, stop_timeout=self.spec.broker_stop_timeout,
            wrap=lambda cls: _in_namespace(cls, net, f"broker-{broker_id}"))


class KernelFaults(PartitionShapes):
    """Partitions by iptables DROP rules in the nodes' namespaces (NetworkFaults' shape)."""

    mechanism = "kernel"
    offers_toxics = False

    def __init__(self, cluster: NetnsCluster) -> None:
        self.cluster = cluster
        self._cut: list[tuple[str, str]] = []

    @property
    def nodes(self) -> list[str]:
        return [*self.cluster.nodes, CLIENT]

    @property
    def brokers(self) -> list[str]:
        return [node for node in self.nodes if node not in (ZOOKEEPER, CLIENT)]

    def _net(self) -> NetnsNetwork:
        if self.cluster.net is None:
            raise RuntimeError("the cluster is not running")
        return self.cluster.net

    def partition(self, grudge: Mapping[str, Iterable[str]]) -> list[tuple[str, str]]:
        """Replace any partition with ``grudge``; returns the directed pairs cut (never
        between the client and ZooKeeper, which have no traffic to cut)."""
        checked = shapes.from_explicit(grudge, self.nodes)
        spared = {ZOOKEEPER, CLIENT}
        kept = {receiver: {sender for sender in senders if {sender, receiver} != spared}
                for receiver, senders in checked.items()}
        self._cut = self._net().partition(kept, host=CLIENT)
        return list(self._cut)

    def heal(self) -> None:
        self._net().heal()
        self._cut = []

    def clear(self) -> None:
        """Everything a kernel fault can be is a partition: heal it."""
        self.heal()

    def add_toxic(self, *_args: Any, **_kwargs: Any) -> str:
        raise ValueError(NO_TOXICS)

    def remove_toxic(self, *_args: Any, **_kwargs: Any) -> None:
        raise ValueError(NO_TOXICS)

    def active(self) -> dict[str, Any]:
        return {"partition": [list(pair) for pair in self._cut], "toxics": {}}
