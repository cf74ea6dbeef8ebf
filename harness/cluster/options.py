"""What a user can ask of a cluster, as plain data and checked before anything starts.

The target names users type, the network mechanisms and backends, and :class:`ClusterOptions`
with the one check of how they combine (:func:`check_options`): the CLI's option parsing, the
pytest plugin's options and the supervisor's command line all need these, and none of them may
have to load a backend or a client library to refuse ``--backend docker --network kernel``. The
factory (:mod:`harness.cluster.factory`) turns checked options into a cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypeVar

from harness.cluster.spec import ClusterSpec

if TYPE_CHECKING:
    from harness.cluster.recipe import Recipe

_E = TypeVar("_E", bound=StrEnum)


class TargetName(StrEnum):
    """What the suites or a run talk to (``--target``)."""

    REFERENCE = "reference"
    APACHE_KAFKA = "apache-kafka"
    APACHE_KAFKA_KRAFT = "apache-kafka-kraft"
    TANSU = "tansu"
    KFAKE = "kfake"  # franz-go's fake cluster, built from ci/kfake by set-up
    LIBRDKAFKA_MOCK = "librdkafka-mock"
    EXTERNAL = "external"
    RECIPE = "recipe"  # a broker kind described in a recipe file (harness/cluster/recipe.py)


class ClusterTarget(StrEnum):
    """The targets the harness runs as a cluster of its own, with every fault (the choices of
    ``kafka-harness run --target``): ZooKeeper and its brokers, or a KRaft quorum of nodes."""

    REFERENCE = TargetName.REFERENCE.value
    APACHE_KAFKA = TargetName.APACHE_KAFKA.value
    APACHE_KAFKA_KRAFT = TargetName.APACHE_KAFKA_KRAFT.value


CLUSTER_TARGETS = tuple(ClusterTarget)
"""The built-in kinds the harness runs as a cluster of its own (a recipe's kind is the other)."""

DOCKER_KINDS = frozenset({TargetName.REFERENCE, TargetName.APACHE_KAFKA,
                          TargetName.APACHE_KAFKA_KRAFT})
"""Kinds the docker backend has an image for: the project image carries the reference broker,
Kafka 3.9's jars and Kafka 4's (see each kind's ``image_directories``)."""

KERNEL_TARGETS = (TargetName.REFERENCE, TargetName.APACHE_KAFKA)
"""Built-in targets the kernel network mechanism (namespaces, iptables) runs: the ZooKeeper-mode
ones (a recipe with ZooKeeper too)."""
DISK_TARGETS = (*KERNEL_TARGETS, TargetName.APACHE_KAFKA_KRAFT)
"""Built-in targets whose brokers' log dirs the harness can put on disks of its own (disk full
and disk errors, ``--disk``). A KRaft node's data dir holds its copy of the metadata log too, so
a failed disk halts the node as a broker and as a voter at once (Kafka halts a node whose
metadata log dir fails)."""


class Network(StrEnum):
    """How network faults are made (``--network``)."""

    PROXY = "proxy"    # Toxiproxy on every link: partitions and toxics
    KERNEL = "kernel"  # root: network namespaces and iptables drops, no toxics


class Backend(StrEnum):
    """Where the nodes run (``--backend``)."""

    LOCAL = "local"
    DOCKER = "docker"


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
    recipe: Recipe | None = None
    """The ``recipe`` target's broker kind, read from its file by
    :func:`~harness.cluster.recipe.load_recipe` (``docs/recipes.md``)."""
    controllers: int = 0
    """Dedicated KRaft controllers (``--controllers``); 0: every node a broker and a voter."""

    def check(self) -> None:
        """ValueError naming the problem with these options (a usage error)."""
        check_options(self.target, self.bootstrap, self.brokers, self.network, self.backend,
                      recipe=self.recipe, controllers=self.controllers)

    @property
    def faultable(self) -> bool:
        """Whether the harness runs this target as a cluster of its own, with faults."""
        return self.target in CLUSTER_TARGETS or self.target == TargetName.RECIPE

    def spec(self, **overrides: Any) -> ClusterSpec:
        return ClusterSpec(brokers=self.brokers, controllers=self.controllers,
                           properties=dict(self.properties), **overrides)


def check_options(target: str, bootstrap: str | None, brokers: int,
                  network: str = Network.PROXY, backend: str = Backend.LOCAL, *,
                  recipe: Recipe | None = None, controllers: int = 0) -> None:
    """ValueError naming the problem with a target's options (a usage error). The recipe
    target's ``recipe`` comes read: :func:`~harness.cluster.recipe.load_recipe` reports a bad
    file with its file and key, so this module need not load the recipe reader, which the CLI's
    options would otherwise pay for at every start."""
    name = _member(TargetName, target, "target")
    target = name.value  # a member's repr would read <TargetName.TANSU: 'tansu'> in messages
    _member(Network, network, "network mechanism")
    _member(Backend, backend, "backend")
    if name == TargetName.RECIPE:
        _check_recipe(recipe, network, backend)
    elif recipe is not None:
        raise ValueError(f"a recipe file is only for the recipe target, not {target!r}")
    if controllers < 0:
        raise ValueError(f"--controllers must be at least 0, got {controllers}")
    if controllers and name != TargetName.APACHE_KAFKA_KRAFT:
        raise ValueError(f"--controllers runs dedicated KRaft controllers, for the "
                         f"{TargetName.APACHE_KAFKA_KRAFT.value} target, not {target!r} (a "
                         f"ZooKeeper-mode cluster's controller is one of its brokers)")
    if backend == Backend.DOCKER and name not in DOCKER_KINDS:
        raise ValueError(f"--backend docker runs the targets {', '.join(sorted(DOCKER_KINDS))}, "
                         f"not {target!r} (its image has no {target} build)")
    if backend == Backend.DOCKER and network == Network.KERNEL:
        raise ValueError("--network kernel is for the local backend: the docker backend cuts "
                         "partitions with iptables inside its containers already")
    if network == Network.KERNEL and name in CLUSTER_TARGETS and name not in KERNEL_TARGETS:
        raise ValueError(f"--network kernel runs the ZooKeeper-mode clusters "
                         f"({', '.join(KERNEL_TARGETS)}), not {target!r}: its links, the "
                         f"quorum's included, are cut through the proxies (--network proxy)")
    if network == Network.KERNEL and name not in KERNEL_TARGETS and name != TargetName.RECIPE:
        raise ValueError(f"--network kernel is for the targets the harness runs as a cluster "
                         f"({', '.join(KERNEL_TARGETS)}), not {target!r}")
    if name == TargetName.EXTERNAL and not bootstrap:
        raise ValueError("the external target needs a bootstrap address (--bootstrap-server)")
    if name != TargetName.EXTERNAL and bootstrap:
        raise ValueError(f"--bootstrap-server is only for the external target, not {target!r}")
    if brokers < 1:
        raise ValueError(f"--brokers must be at least 1, got {brokers}")


def _check_recipe(recipe: Recipe | None, network: str, backend: str) -> None:
    """The recipe target's options: a recipe, the local backend, and the kernel network only
    for a recipe with ZooKeeper."""
    if recipe is None:
        raise ValueError("the recipe target needs a recipe file (docs/recipes.md)")
    if backend == Backend.DOCKER:
        raise ValueError("a recipe's broker runs on the local backend only: the docker image "
                         "carries the built-in kinds, not a user's broker")
    if network == Network.KERNEL and not recipe.zookeeper:
        raise ValueError("--network kernel runs ZooKeeper in a namespace of its own; a recipe "
                         "without ZooKeeper runs behind the proxy network mechanism only "
                         "(--network proxy)")


def _member(enum: type[_E], value: str, what: str) -> _E:
    try:
        return enum(value)
    except ValueError:
        raise ValueError(f"unknown {what} {value!r}; one of "
                         f"{', '.join(member.value for member in enum)}") from None


