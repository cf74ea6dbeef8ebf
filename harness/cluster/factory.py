"""The one place a cluster is chosen: target × network mechanism × backend.

Every caller — the pytest plugin, ``kafka-harness up`` (its supervisor), ``kafka-harness run``
and the matrix — describes what it wants as :class:`ClusterOptions` and asks :func:`build` for
an unstarted cluster and its faults, so no caller branches on the combination itself and a new
broker kind is one entry in :data:`BROKER_KINDS`.

The combinations that exist:

=====================  ===========================  ==========================================
target                 network / backend            what runs
=====================  ===========================  ==========================================
reference,             proxy / local                ZooKeeper + N brokers, every link through
apache-kafka                                        Toxiproxy (:class:`ProxiedCluster`)
reference,             kernel / local (root)        each node in a network namespace, iptables
apache-kafka                                        drops (:class:`NetnsCluster`)
reference,             proxy / docker               containers behind a Toxiproxy container
apache-kafka,                                       (:class:`DockerCluster`)
apache-kafka-kraft
recipe (a file)        proxy / local,               the same, with the nodes a recipe describes
                       kernel / local (root; a      (:mod:`harness.cluster.recipe`)
                       recipe with ZooKeeper)
apache-kafka-kraft     proxy / local,               N KRaft nodes, each a broker and a voter, every
                       proxy / docker               link and the quorum's channel through
                                                    Toxiproxy (:mod:`harness.cluster.kraft`), no
                                                    ZooKeeper
tansu,                 (none)                       no faults (peers, see
kfake,                                              :func:`harness.cluster.targets.start_target`)
librdkafka-mock,
external
=====================  ===========================  ==========================================
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from harness.cluster.docker.backend import DockerCluster
from harness.cluster.docker.faults import IptablesPartitions
from harness.cluster.kinds import BrokerKind
from harness.cluster.netns_cluster import KernelFaults, NetnsCluster
from harness.cluster.nodes import ClusterNodes
from harness.cluster.options import Backend, ClusterOptions, Network, TargetName
from harness.cluster.proxied import ProxiedCluster
from harness.cluster.proxy_faults import NetworkFaults
from harness.cluster.recipe_kind import RecipeKind
from harness.cluster.registry import BROKER_KINDS
from harness.cluster.spec import ClusterSpec


class RunnableCluster(Protocol):
    """A cluster a backend built: started, stopped, and reached through its nodes."""

    @property
    def bootstrap(self) -> str: ...

    @property
    def cluster(self) -> ClusterNodes: ...

    def start(self) -> object: ...

    def stop(self) -> None: ...

    def log_paths(self) -> list[Path]: ...


class Faults(Protocol):
    """A network mechanism's faults: partitions (by shape or grudge) and, where it can, toxics."""

    offers_toxics: bool

    @property
    def nodes(self) -> list[str]: ...

    def partition(self, grudge: Mapping[str, Iterable[str]]) -> list[tuple[str, str]]: ...

    def isolate(self, node: str) -> list[tuple[str, str]]: ...

    def halves(self, nodes: Sequence[str] | None = None) -> list[tuple[str, str]]: ...

    def ring(self, nodes: Sequence[str] | None = None) -> list[tuple[str, str]]: ...

    def bridge(self, nodes: Sequence[str] | None = None) -> list[tuple[str, str]]: ...

    def heal(self) -> None: ...

    def clear(self) -> None: ...

    def add_toxic(self, link: str, type: str, attributes: dict[str, Any], *,  # noqa: A002
                  stream: str = ..., toxicity: float = ..., name: str | None = ...) -> str: ...

    def remove_toxic(self, link: str, name: str) -> None: ...

    def active(self) -> dict[str, Any]: ...


@dataclass
class BuiltCluster:
    """An unstarted cluster, its faults, and the name of the network mechanism for reports."""

    cluster: RunnableCluster
    faults: Faults
    mechanism: str
    kind: BrokerKind


def broker_kind(options: ClusterOptions) -> BrokerKind:
    """The broker kind of a faultable target: built in, or read from the recipe file."""
    if options.target == TargetName.RECIPE:
        assert options.recipe is not None  # check() refuses the recipe target without one
        return RecipeKind(options.recipe)
    return BROKER_KINDS[TargetName(options.target)]()


def build(options: ClusterOptions, run_dir: Path | None, *,
          spec: ClusterSpec | None = None) -> BuiltCluster:
    """The cluster ``options`` describe, not yet started (``spec`` overrides the one the
    options make). Only for faultable targets (:attr:`ClusterOptions.faultable`)."""
    options.check()
    kind = broker_kind(options)
    spec = spec or options.spec()
    if options.backend == Backend.DOCKER:
        return _docker(spec, run_dir, kind)
    if options.network == Network.KERNEL:
        kernel = NetnsCluster(spec, run_dir=run_dir, kind=kind)
        return BuiltCluster(kernel, KernelFaults(kernel), "kernel", kind)
    proxied = ProxiedCluster(spec, run_dir=run_dir, toxiproxy_url=options.toxiproxy_url,
                             kind=kind)
    return BuiltCluster(proxied, NetworkFaults(proxied), "proxy", kind)


def _docker(spec: ClusterSpec, run_dir: Path | None, kind: BrokerKind) -> BuiltCluster:
    docker: DockerCluster = DockerCluster(spec, run_dir=run_dir, kind=kind)
    return BuiltCluster(docker, IptablesPartitions(docker), "docker", kind)
