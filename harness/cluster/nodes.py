"""The node-control surface process faults, runs and tests use, whatever runs the nodes.

A :class:`~harness.cluster.local.LocalCluster` (behind the proxies or in namespaces) and a
:class:`~harness.cluster.docker.backend.DockerCluster` both offer it, with processes or containers
as nodes; code that only kills, pauses, restarts or inspects nodes takes a :class:`ClusterNodes`
instead of either class.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from harness.cluster.kinds import BrokerKind
from harness.cluster.node import BrokerNode, ProcessNode
from harness.cluster.spec import ClusterSpec
from harness.cluster.state import ClusterState

if TYPE_CHECKING:
    from kazoo.client import KazooClient


class ClusterNodes(Protocol):
    """ZooKeeper and the brokers of a reference cluster, by broker id."""

    @property
    def spec(self) -> ClusterSpec: ...

    @property
    def kind(self) -> BrokerKind: ...

    @property
    def bootstrap(self) -> str: ...

    @property
    def zookeeper(self) -> ProcessNode | None: ...

    @property
    def brokers(self) -> Mapping[int, BrokerNode]: ...

    @property
    def controllers(self) -> Mapping[int, BrokerNode]:
        """Dedicated KRaft controllers by node id; empty where the brokers are the voters or
        ZooKeeper is the controller's store."""
        ...

    @property
    def paused(self) -> frozenset[int]: ...

    def broker(self, broker_id: int) -> BrokerNode: ...

    def kill(self, broker_id: int) -> int | None: ...

    def stop_broker(self, broker_id: int) -> int | None: ...

    def start_broker(self, broker_id: int, *, wait_for_deregistration: bool = True) -> None: ...

    def pause(self, broker_id: int) -> None: ...

    def resume(self, broker_id: int) -> None: ...

    def partition_state(self, topic: str, partition: int) -> dict[str, Any] | None: ...

    @property
    def reads(self) -> ClusterState:
        """Where the state questions are answered: ZooKeeper, or a KRaft quorum's nodes."""
        ...

    def registered_broker_ids(self) -> list[int]: ...

    def lists_brokers(self, broker_id: int, expected: set[int]) -> bool:
        """Whether ``broker_id``'s own Metadata answer lists every broker in ``expected``."""
        ...

    def running_broker_ids(self) -> list[int]: ...

    def controller_id(self) -> int | None: ...

    def controller_epoch(self) -> int | None: ...

    def zk(self, timeout: float = ...) -> contextlib.AbstractContextManager[KazooClient]: ...

    def leader(self, topic: str, partition: int) -> int | None: ...

    def wait_for(self, predicate: Callable[[], Any], timeout: float, what: str, *,
                 interval: float = ...) -> Any: ...

    def log_paths(self) -> list[Path]: ...


def wait_until_whole(nodes: ClusterNodes, timeout: float, after: str) -> None:
    """Wait until every broker is registered and every broker's own Metadata lists them all.

    Registration alone is not enough: a broker learns of the others from its controller
    (ZooKeeper mode's UpdateMetadata, KRaft's metadata log), a moment after they register, and
    until then CreateTopics with a replication factor of every broker fails on it with
    INVALID_REPLICATION_FACTOR ("larger than available brokers").
    """
    everyone = sorted(nodes.brokers)
    nodes.wait_for(lambda: nodes.registered_broker_ids() == everyone, timeout,
                   f"brokers {everyone} registered {after}")
    for broker_id in everyone:
        nodes.wait_for(partial(nodes.lists_brokers, broker_id, set(everyone)), timeout,
                       f"broker {broker_id}'s Metadata to list brokers {everyone} {after}")
