"""The named partition shapes, once for every fault mechanism.

A mechanism (Toxiproxy toxics, iptables in namespaces or containers) only has to cut an explicit
grudge (:meth:`partition`) and name its nodes; the shapes are the pure functions of
:mod:`harness.net.grudge` applied to those nodes, the same whichever mechanism cuts them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from harness.net import grudge as shapes


class PartitionShapes:
    """isolate / halves / ring / bridge on top of a subclass's ``partition(grudge)``."""

    @property
    def nodes(self) -> list[str]:
        """Every node a grudge may name."""
        raise NotImplementedError

    @property
    def brokers(self) -> list[str]:
        """The nodes a shape covers when none are given."""
        raise NotImplementedError

    def partition(self, grudge: Mapping[str, Iterable[str]]) -> list[tuple[str, str]]:
        raise NotImplementedError

    def isolate(self, node: str) -> list[tuple[str, str]]:
        """Cut ``node`` off from every other node (ZooKeeper and the client included), both ways."""
        if node not in self.nodes:
            raise ValueError(f"unknown node {node!r}; nodes are {self.nodes}")
        return self.partition(shapes.isolate(self.nodes, node))

    def halves(self, nodes: Sequence[str] | None = None) -> list[tuple[str, str]]:
        """Two halves that cannot hear each other, the first (larger) keeping the majority."""
        return self.partition(shapes.halves(self._shape_nodes(nodes)))

    def ring(self, nodes: Sequence[str] | None = None) -> list[tuple[str, str]]:
        """Jepsen's majorities ring: each node hears a majority no other node shares."""
        return self.partition(shapes.majorities_ring(self._shape_nodes(nodes)))

    def bridge(self, nodes: Sequence[str] | None = None) -> list[tuple[str, str]]:
        """Two halves joined only through one node that hears, and is heard by, both."""
        return self.partition(shapes.bridge(self._shape_nodes(nodes)))

    def _shape_nodes(self, nodes: Sequence[str] | None) -> list[str]:
        chosen = list(nodes) if nodes is not None else self.brokers
        unknown = [node for node in chosen if node not in self.nodes]
        if unknown:
            raise ValueError(f"unknown node(s) {unknown}; nodes are {self.nodes}")
        return chosen
