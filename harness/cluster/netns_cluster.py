"""The local cluster with every node in its own network namespace, for kernel-level partitions.

Where :class:`~harness.cluster.proxied.ProxiedCluster` cuts links in user space (Toxiproxy),
this backend gives ZooKeeper and each broker a namespace and an address of its own on a private
bridge (:class:`~harness.net.netns.NetnsNetwork`), so a partition is what Jepsen and Kafka's
Trogdor make it: iptables dropping the packets of the nodes a receiver holds a grudge against.
It needs root. Clients run in the root namespace and reach the brokers through the bridge.

:class:`KernelFaults` has the partition half of :class:`~harness.nemesis.network.NetworkFaults`'
API over it. Toxics (latency, bandwidth, ...) need the proxies; client-side partitions too,
because the client is the host itself, whose firewall the harness does not touch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.cluster.local import ClusterSpec, LocalCluster
from harness.cluster.peers import ReferenceBroker
from harness.cluster.zookeeper import ZooKeeperServer
from harness.net import grudge as shapes
from harness.net.netns import NetnsNetwork

ZOOKEEPER = "zk"


def _in_namespace(cls: type, net: NetnsNetwork, node: str) -> type:
    """``cls`` (a ManagedProcess) running inside ``node``'s namespace, on its address."""

    class InNamespace(cls):  # type: ignore[valid-type,misc]
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
                 *, prefix: str = "kh") -> None:
        super().__init__(spec, run_dir)
        self._prefix = prefix
        self.net: NetnsNetwork | None = None

    @property
    def nodes(self) -> list[str]:
        return [ZOOKEEPER, *(f"broker-{b}" for b in self.spec.broker_ids)]

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

    def _new_broker(self, broker_id: int, run_dir: Path, port: int,
                    properties: Mapping[str, str | int]) -> ReferenceBroker:
        assert self.net is not None
        cls = _in_namespace(ReferenceBroker, self.net, f"broker-{broker_id}")
        return cls(run_dir, port=port, properties=properties,
                   startup_timeout=self.spec.startup_timeout,
                   stop_timeout=self.spec.broker_stop_timeout)


class KernelFaults:
    """Partitions by iptables DROP rules in the receivers' namespaces (NetworkFaults' shape)."""

    mechanism = "iptables"

    def __init__(self, cluster: NetnsCluster) -> None:
        self.cluster = cluster
        self._cut: list[tuple[str, str]] = []

    @property
    def nodes(self) -> list[str]:
        return self.cluster.nodes

    @property
    def brokers(self) -> list[str]:
        return [node for node in self.nodes if node != ZOOKEEPER]

    def _net(self) -> NetnsNetwork:
        if self.cluster.net is None:
            raise RuntimeError("the cluster is not running")
        return self.cluster.net

    def partition(self, grudge: Mapping[str, Iterable[str]]) -> list[tuple[str, str]]:
        """Replace any partition with ``grudge``; returns the directed pairs cut."""
        checked = shapes.from_explicit(grudge, self.nodes)
        self._cut = self._net().partition(checked)
        return list(self._cut)

    def isolate(self, node: str) -> list[tuple[str, str]]:
        if node not in self.nodes:
            raise ValueError(f"unknown node {node!r}; nodes are {self.nodes} (client-side "
                             "partitions need the proxies mechanism)")
        return self.partition(shapes.isolate(self.nodes, node))

    def halves(self, nodes: Sequence[str] | None = None) -> list[tuple[str, str]]:
        return self.partition(shapes.halves(list(nodes or self.brokers)))

    def ring(self, nodes: Sequence[str] | None = None) -> list[tuple[str, str]]:
        return self.partition(shapes.majorities_ring(list(nodes or self.brokers)))

    def bridge(self, nodes: Sequence[str] | None = None) -> list[tuple[str, str]]:
        return self.partition(shapes.bridge(list(nodes or self.brokers)))

    def heal(self) -> None:
        self._net().heal()
        self._cut = []

    def clear(self) -> None:
        self.heal()

    def add_toxic(self, *_args: Any, **_kwargs: Any) -> str:
        raise ValueError("toxics (latency, bandwidth, ...) need the proxies mechanism")

    def active(self) -> dict[str, Any]:
        return {"partition": [list(pair) for pair in self._cut], "toxics": {}}
