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
apache-kafka                                        (:class:`DockerCluster`)
recipe (a file)        proxy / local,               the same, with the nodes a recipe describes
                       kernel / local (root; a      (:mod:`harness.cluster.recipe`)
                       recipe with ZooKeeper)
apache-kafka-kraft,    (none)                       one node, no faults (peers, see
tansu,                                              :func:`harness.cluster.targets.start_target`)
librdkafka-mock,
external
=====================  ===========================  ==========================================
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from harness.cluster.registry import BROKER_KINDS, DOCKER_KINDS, TargetName

if TYPE_CHECKING:
    from harness.cluster.docker_backend import DockerCluster
    from harness.cluster.kinds import BrokerKind
    from harness.cluster.local import ClusterSpec
    from harness.cluster.nodes import ClusterNodes

_E = TypeVar("_E", bound=StrEnum)


class Network(StrEnum):
    """How network faults are made (``--network``)."""

    PROXY = "proxy"    # Toxiproxy on every link: partitions and toxics
    KERNEL = "kernel"  # root: network namespaces and iptables drops, no toxics


class Backend(StrEnum):
    """Where the nodes run (``--backend``)."""

    LOCAL = "local"
    DOCKER = "docker"


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


@dataclass(frozen=True)
class ClusterOptions:
    """What cluster to run: plain data, from CLI flags or plugin options."""

    target: TargetName = TargetName.REFERENCE
    brokers: int = 3
    network: Network = Network.PROXY
    backend: Backend = Backend.LOCAL
    bootstrap: str | None = None
    properties: Mapping[str, str | int] = field(default_factory=dict)
    toxiproxy_url: str | None = None
    recipe: Path | None = None
    """The recipe file of the ``recipe`` target (``docs/recipes.md``)."""

    def check(self) -> None:
        """ValueError naming the problem with these options (a usage error)."""
        check_options(self.target, self.bootstrap, self.brokers, self.network, self.backend,
                      recipe=self.recipe)

    @property
    def faultable(self) -> bool:
        """Whether the harness runs this target as a cluster of its own, with faults."""
        return TargetName(self.target) in BROKER_KINDS or self.target == TargetName.RECIPE

    def kind(self) -> BrokerKind:
        """The broker kind of a faultable target: built in, or read from the recipe file."""
        if self.target == TargetName.RECIPE:
            from harness.cluster.recipe import load_recipe
            from harness.cluster.recipe_kind import RecipeKind

            assert self.recipe is not None  # check() refuses the recipe target without one
            return RecipeKind(load_recipe(self.recipe))
        return BROKER_KINDS[TargetName(self.target)]()

    def spec(self, **overrides: Any) -> ClusterSpec:
        from harness.cluster.local import ClusterSpec

        return ClusterSpec(brokers=self.brokers, properties=dict(self.properties), **overrides)


def check_options(target: str, bootstrap: str | None, brokers: int,
                  network: str = Network.PROXY, backend: str = Backend.LOCAL, *,
                  recipe: Path | None = None) -> None:
    """ValueError naming the problem with a target's options (a usage error); a recipe file
    is read, so a bad one is reported here with its file and key (a RecipeError)."""
    name = _member(TargetName, target, "target")
    target = name.value  # a member's repr would read <TargetName.TANSU: 'tansu'> in messages
    _member(Network, network, "network mechanism")
    _member(Backend, backend, "backend")
    if name == TargetName.RECIPE:
        _check_recipe(recipe, network, backend)
    elif recipe is not None:
        raise ValueError(f"a recipe file is only for the recipe target, not {target!r}")
    if backend == Backend.DOCKER and name not in DOCKER_KINDS:
        raise ValueError(f"--backend docker runs the targets {', '.join(sorted(DOCKER_KINDS))}, "
                         f"not {target!r} (its image has no {target} build)")
    if backend == Backend.DOCKER and network == Network.KERNEL:
        raise ValueError("--network kernel is for the local backend: the docker backend cuts "
                         "partitions with iptables inside its containers already")
    if network == Network.KERNEL and name not in BROKER_KINDS and name != TargetName.RECIPE:
        raise ValueError(f"--network kernel is for the targets the harness runs as a cluster "
                         f"({', '.join(BROKER_KINDS)}), not {target!r}")
    if name == TargetName.EXTERNAL and not bootstrap:
        raise ValueError("the external target needs a bootstrap address (--bootstrap-server)")
    if name != TargetName.EXTERNAL and bootstrap:
        raise ValueError(f"--bootstrap-server is only for the external target, not {target!r}")
    if brokers < 1:
        raise ValueError(f"--brokers must be at least 1, got {brokers}")


def _check_recipe(recipe: Path | None, network: str, backend: str) -> None:
    """The recipe target's options: a readable, valid recipe (else a RecipeError naming its
    file and key), the local backend, and the kernel network only for a recipe with ZooKeeper."""
    if recipe is None:
        raise ValueError("the recipe target needs a recipe file (docs/recipes.md)")
    if backend == Backend.DOCKER:
        raise ValueError("a recipe's broker runs on the local backend only: the docker image "
                         "carries the built-in kinds, not a user's broker")
    from harness.cluster.recipe import load_recipe

    loaded = load_recipe(recipe)
    if network == Network.KERNEL and not loaded.zookeeper:
        raise ValueError("--network kernel runs ZooKeeper in a namespace of its own; a recipe "
                         "without ZooKeeper runs behind the proxy network mechanism only "
                         "(--network proxy)")


def _member(enum: type[_E], value: str, what: str) -> _E:
    try:
        return enum(value)
    except ValueError:
        raise ValueError(f"unknown {what} {value!r}; one of "
                         f"{', '.join(member.value for member in enum)}") from None


@dataclass
class BuiltCluster:
    """An unstarted cluster, its faults, and the name of the network mechanism for reports."""

    cluster: RunnableCluster
    faults: Faults
    mechanism: str
    kind: BrokerKind


def build(options: ClusterOptions, run_dir: Path | None, *,
          spec: ClusterSpec | None = None) -> BuiltCluster:
    """The cluster ``options`` describe, not yet started (``spec`` overrides the one the
    options make). Only for faultable targets (:attr:`ClusterOptions.faultable`)."""
    options.check()
    kind = options.kind()
    spec = spec or options.spec()
    if options.backend == Backend.DOCKER:
        return _docker(spec, run_dir, kind)
    if options.network == Network.KERNEL:
        from harness.cluster.netns_cluster import KernelFaults, NetnsCluster

        kernel = NetnsCluster(spec, run_dir=run_dir, kind=kind)
        return BuiltCluster(kernel, KernelFaults(kernel), "kernel", kind)
    from harness.cluster.proxied import ProxiedCluster
    from harness.cluster.proxy_faults import NetworkFaults

    proxied = ProxiedCluster(spec, run_dir=run_dir, toxiproxy_url=options.toxiproxy_url,
                             kind=kind)
    return BuiltCluster(proxied, NetworkFaults(proxied), "proxy", kind)


def _docker(spec: ClusterSpec, run_dir: Path | None, kind: BrokerKind) -> BuiltCluster:
    from harness.cluster.docker_backend import DockerCluster
    from harness.cluster.docker_faults import IptablesPartitions

    docker: DockerCluster = DockerCluster(spec, run_dir=run_dir, kind=kind)
    return BuiltCluster(docker, IptablesPartitions(docker), "docker", kind)
