"""Partitions of a :class:`~harness.cluster.docker.backend.DockerCluster` cut in the kernel.

Kept apart from the cluster itself because it is the one piece that touches the containers'
network namespaces (iptables through ``nsenter`` or ``docker exec``); the cluster only starts
and stops containers.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from typing import Any

from toxiproxy.proxy import Proxy

from harness.cluster.docker.backend import TOXIPROXY_NODE, DockerCluster
from harness.cluster.proxied import CLIENT
from harness.cluster.proxy_faults import (
    NetworkFaults,
    cut_streams,
    pairs_from_toxics,
    partition_toxic_name,
)
from harness.net import grudge as shapes

IPTABLES_CHAIN = "KAFKA-HARNESS"


class IptablesPartitions(NetworkFaults):
    """:class:`NetworkFaults` whose partitions are cut in the kernel instead of in the proxies.

    The same directed pairs (from the same grudges and shapes), mapped to the same links and
    streams, and each (link, stream) dropped where that link's opening end lives: a node's
    outgoing packets to the link's port in the Toxiproxy container (upstream), or its incoming
    packets from that port (downstream), inside the node's own network namespace — a broker's,
    or a dedicated controller's for its links to the other controllers (the links to a
    controller open at the broker or controller that dials it); for client links, in the
    Toxiproxy container's namespace, since the client is the host. Rules live in
    one chain, ``KAFKA-HARNESS``, per namespace, each commented with its link and stream, so
    healing is a flush and :meth:`active` reads the kernel: any instance sees and heals what
    another applied. Nothing is reset: to both ends it looks like lost packets. Toxics still
    go through the Toxiproxy container, as in :class:`NetworkFaults`.
    """

    def __init__(self, cluster: DockerCluster) -> None:
        super().__init__(cluster)
        self.cluster: DockerCluster = cluster
        self.mechanism = "kernel"

    def partition(self, grudge: Mapping[str, Iterable[str]]) -> list[tuple[str, str]]:
        """Heal, then drop the traffic ``grudge`` names; returns the directed pairs cut."""
        checked = shapes.from_explicit(grudge, self.nodes)
        pairs = shapes.links_to_cut(checked)
        self.heal()
        for link, stream in cut_streams(pairs, self.cluster.links):
            node, rule = self._rule(link, stream)
            self._ensure_chain(node)
            self._check(node, ["-A", IPTABLES_CHAIN, *rule, "-m", "comment", "--comment",
                               f"{link} {stream}", "-j", "DROP"])
        return pairs

    def heal(self) -> None:
        """Flush the chain in every running container (a stopped one lost its namespace)."""
        for node in self.cluster.containers:
            if self._pid(node):
                self._run(node, ["-F", IPTABLES_CHAIN])  # fails where no chain was made

    def clear(self) -> None:
        self.heal()
        super().clear()

    def active(self) -> dict[str, Any]:
        """The partition as the kernels hold it, and the proxies' toxics."""
        cuts: dict[str, list[str]] = {}
        for rules in self.rules().values():
            for rule in rules:
                link, _, stream = rule.split('--comment "', 1)[1].split('"', 1)[0].partition(" ")
                cuts.setdefault(link, []).append(partition_toxic_name(stream))
        return {**super().active(),
                "partition": [list(pair) for pair in pairs_from_toxics(cuts)]}

    def rules(self) -> dict[str, list[str]]:
        """Node -> the DROP rules in its chain, as ``iptables -S`` prints them."""
        found = {}
        for node in self.cluster.containers:
            if self._pid(node):
                code, output = self._run(node, ["-S", IPTABLES_CHAIN])
                drops = [line for line in output.splitlines() if line.startswith("-A ")]
                if code == 0 and drops:
                    found[node] = drops
        return found

    def _rule(self, link: str, stream: str) -> tuple[str, list[str]]:
        """(node whose namespace holds the rule, the match) dropping one stream of a link."""
        opener = link.partition("->")[0]
        proxy_port = str(_container_port(self.cluster.proxies[link]))
        toxiproxy = self.cluster.addresses[TOXIPROXY_NODE]
        if opener == CLIENT:
            if stream == "upstream":
                return TOXIPROXY_NODE, ["-p", "tcp", "--dport", proxy_port]
            return TOXIPROXY_NODE, ["-p", "tcp", "--sport", proxy_port]
        if stream == "upstream":
            return opener, ["-p", "tcp", "-d", toxiproxy, "--dport", proxy_port]
        return opener, ["-p", "tcp", "-s", toxiproxy, "--sport", proxy_port]

    def _ensure_chain(self, node: str) -> None:
        if self._run(node, ["-n", "-L", IPTABLES_CHAIN])[0] != 0:
            self._check(node, ["-N", IPTABLES_CHAIN])
            for chain in ("INPUT", "OUTPUT"):
                self._check(node, ["-I", chain, "-j", IPTABLES_CHAIN])

    def _pid(self, node: str) -> int:
        container = self.cluster.containers[node]
        container.reload()
        return int(container.attrs["State"]["Pid"])

    def _check(self, node: str, arguments: list[str]) -> None:
        code, output = self._run(node, arguments)
        if code != 0:
            raise RuntimeError(f"iptables {' '.join(arguments)} in {node} failed: {output}")

    def _run(self, node: str, arguments: list[str]) -> tuple[int, str]:
        """iptables in the node's namespace: nsenter from the host when root (works on a
        paused container too), else ``docker exec`` (the containers have NET_ADMIN)."""
        if os.geteuid() == 0 and shutil.which("nsenter") and shutil.which("iptables"):
            command = ["nsenter", "-t", str(self._pid(node)), "-n", "iptables", "-w",
                       *arguments]
            result = subprocess.run(command, capture_output=True, text=True)
            return result.returncode, result.stdout + result.stderr
        code, raw = self.cluster.containers[node].exec_run(["iptables", "-w", *arguments])
        return int(code), raw.decode(errors="replace")


def _container_port(proxy: Proxy) -> int:
    return int(proxy.listen.rpartition(":")[2])
