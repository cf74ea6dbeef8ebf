"""Broker kinds: what differs between the brokers a cluster can be made of, and nothing else.

A cluster is ZooKeeper + N broker nodes of one kind, on one backend, behind one network
mechanism (see ``docs/cluster-model.md``). The kind (Jepsen's "db") is the only axis that knows
a broker's configuration keys and command line: the backends (local processes, network
namespaces, containers) and the network mechanisms (Toxiproxy proxies, iptables) hand a node a
:class:`BrokerWiring` — where it listens, which address each peer is to be dialled at, where
ZooKeeper is — and the kind turns that into its own configuration.

The wiring is pair-exact on purpose. A Toxiproxy proxy sees connections, not senders, so to cut
``broker-1 -> broker-3`` without also cutting ``broker-2 -> broker-3`` every (source,
destination) pair needs a proxy of its own, and the source must be made to dial it. The
reference broker is told per destination (``broker.peer.addresses``); Apache Kafka dials the
address a peer *advertises* for the listener named by its own ``inter.broker.listener.name``,
so each Kafka broker gets one listener per source broker, each advertised at that pair's proxy
(see :mod:`harness.cluster.apache_kafka`). A KRaft node is also a voter of the controller quorum,
and Kafka 4's voters dial the address a leader *advertises* for their own first controller
listener, as brokers do for replication: so a quorum node gets one controller listener per
source node too (``controller``, ``voters``, ``voters_dial_me``), and a cut between two nodes cuts
their Raft traffic with their replication.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Protocol

from harness.cluster.node import BrokerNode
from harness.net.ports import LOOPBACK, free_port

Wrap = Callable[[type], type]
"""What a backend does to a broker class before it is built: e.g. run it inside a network
namespace, on that namespace's address (see :mod:`harness.cluster.netns_cluster`)."""


class Capability(StrEnum):
    """What a target can do; the suites' ``requires_<capability>`` markers name these."""

    FAULTS = "faults"                  # network faults on every link (proxies or iptables)
    PROCESS_FAULTS = "process_faults"  # kill / pause / restart / lose-unflushed of brokers
    ZOOKEEPER = "zookeeper"            # a ZooKeeper the harness can read (znodes, controller)
    CONTROLLER = "controller"          # controller failover can be provoked
    MULTI_BROKER = "multi_broker"      # more than one broker (replication, ISR, failover)
    CREATE_TOPICS = "create_topics"    # CreateTopics is implemented
    LONE_BROKER = "lone_broker"        # a broker serves while every other one is down
    QUORUM = "quorum"                  # a KRaft controller quorum to read and fault
    TRANSACTIONS = "transactions"      # transactions (KIP-98): InitProducerId with an id, EndTxn…

    @property
    def reason(self) -> str:
        """What a target with this capability does, for markers and skip reasons."""
        return _CAPABILITY_REASONS[self]


_CAPABILITY_REASONS = {
    Capability.FAULTS: "injects network faults through proxies on every link",
    Capability.PROCESS_FAULTS: "kills, pauses and restarts broker processes",
    Capability.ZOOKEEPER: "exposes a ZooKeeper the harness can read",
    Capability.CONTROLLER: "has a controller the harness can fail over",
    Capability.MULTI_BROKER: "runs more than one broker",
    Capability.CREATE_TOPICS: "implements CreateTopics",
    Capability.LONE_BROKER: ("lets a broker serve while every other broker is down (its metadata "
                             "is kept elsewhere: ZooKeeper or controllers of their own, not a "
                             "quorum of the brokers themselves)"),
    Capability.QUORUM: ("runs a KRaft controller quorum the harness reads (DescribeQuorum) and "
                        "faults (its Raft links are behind the proxies)"),
    Capability.TRANSACTIONS: "implements transactions",
}

ZOOKEEPER_MODE = frozenset(Capability) - {Capability.QUORUM}
"""What a ZooKeeper-mode cluster the harness runs can do: everything but a KRaft quorum."""



class ProcessRole(StrEnum):
    """What a node of a KRaft cluster is (Kafka's ``process.roles``): a broker, a voter of the
    controller quorum, or both (combined mode)."""

    BROKER = "broker"
    CONTROLLER = "controller"


@dataclass(frozen=True)
class BrokerPorts:
    """The ports one broker listens on: ``client`` for clients (and the harness), ``inbound[i]``
    where broker ``i``'s connections arrive (itself included: a controller talks to itself).

    A kind with one listener for everything has ``inbound[i] == client`` for every ``i``.
    """

    client: int
    inbound: Mapping[int, int]
    controller: Mapping[int, int] = field(default_factory=dict)
    """For a node of a Raft quorum (KRaft), its controller listeners by source node: where
    node ``i``'s Raft requests and controller requests arrive; empty for a kind without one."""

    @property
    def roles(self) -> frozenset[ProcessRole]:
        """A node with broker listeners is a broker; one with controller listeners a voter."""
        return frozenset({*([ProcessRole.BROKER] if self.inbound else []),
                          *([ProcessRole.CONTROLLER] if self.controller else [])})


@dataclass(frozen=True)
class BrokerWiring:
    """Everything about the network around one broker that its configuration must say.

    ``dial[j]`` is the address this broker must use to reach broker ``j``; ``dialled_at[i]`` the
    address broker ``i`` uses to reach this one (the same pairs seen from the other end; a kind
    that can only advertise, like Apache Kafka, needs this side).
    """

    broker_id: int
    host: str
    ports: BrokerPorts
    advertised_client: str
    dial: Mapping[int, str]
    dialled_at: Mapping[int, str]
    zookeeper_connect: str
    voters: Mapping[int, str] = field(default_factory=dict)
    """For a node of a controller quorum: the address at which this node reaches each voter's
    controller listener for it (itself included); empty for a kind without a quorum."""
    voters_dial_me: Mapping[int, str] = field(default_factory=dict)
    """The address at which each voter ``i`` reaches this node's controller listener for ``i``
    (what this node advertises for it): the same pairs as ``voters``, seen from the other end."""


@dataclass(frozen=True)
class ContainerLaunch:
    """What a container backend runs for one broker: the same program a local process would
    be, with paths inside the container.

    ``files`` (name -> text) are written into the config dir before every start, so a restart
    reads its configuration as a first start does; ``command`` then runs in their place.
    """

    command: tuple[str, ...]
    files: Mapping[str, str]


class BrokerKind(Protocol):
    """One kind of broker the harness can run as a cluster node."""

    @property
    def name(self) -> str:
        """The target name users type (``--target``)."""
        ...

    @property
    def capabilities(self) -> frozenset[Capability]:
        """What a cluster of this kind offers when the harness runs it on a backend."""
        ...

    @property
    def listener_per_peer(self) -> bool:
        """Whether each peer broker must arrive on a port of its own (see the module doc)."""
        ...

    @property
    def controller_quorum(self) -> bool:
        """Whether its nodes are the voters of a Raft controller quorum (KRaft): each gets a
        controller listener per source node, and the wiring says where it reaches every
        voter's and where every voter reaches its own."""
        ...

    @property
    def needs_zookeeper(self) -> bool:
        """Whether its nodes need a ZooKeeper (the cluster state is then read there; without
        one, through the Admin API: :class:`~harness.cluster.state.AdminState`)."""
        ...

    @property
    def log_name(self) -> str:
        """The node's log file name in its run directory, without ``.log``."""
        ...

    @property
    def clean_exit_codes(self) -> frozenset[int]:
        """What the process exits with after a clean, SIGTERM-initiated shutdown."""
        ...

    def version(self) -> str:
        """The broker's version, for reports and ``pytest_report_header``."""
        ...

    def wiring_properties(self, wiring: BrokerWiring) -> dict[str, str | int]:
        """This kind's configuration keys for ``wiring`` (listeners, peers, ZooKeeper)."""
        ...

    def new_broker(self, run_dir: Path, *, port: int, properties: Mapping[str, str | int],
                   startup_timeout: float, stop_timeout: float,
                   wrap: Wrap | None = None) -> BrokerNodeProcess:
        """An unstarted broker process, its class passed through ``wrap`` first if given."""
        ...

    def container_launch(self, properties: Mapping[str, str | int],
                         config_dir: str) -> ContainerLaunch:
        """How a broker configured by ``properties`` runs in a container of the project image
        (see :class:`ContainerLaunch`), its files written under ``config_dir`` there."""
        ...

    def image_directories(self) -> Mapping[str, Path]:
        """Host directories the project image must carry for :meth:`container_launch`, by
        their path in the image (the image's tag covers their contents); empty if none."""
        ...


class BrokerNodeProcess(BrokerNode, Protocol):
    """What a backend needs of a broker process beyond the node-control surface."""

    name: str
    port: int | None

    @property
    def host(self) -> str: ...

    @property
    def bootstrap(self) -> str: ...

    @property
    def log_path(self) -> Path: ...


def allocate_ports(kind: BrokerKind, broker_ids: list[int], host: str = LOOPBACK, *,
                   controller_ids: list[int] | None = None) -> dict[int, BrokerPorts]:
    """Distinct free ports for every node: one each, plus one per source broker for a kind
    that takes every peer on a listener of its own, plus one per source node on a voter of a
    controller quorum — every broker of a combined quorum, or the dedicated ``controller_ids``
    (whose own controller listener is then their ``client`` port, the one the harness asks)."""
    controller_ids = list(controller_ids or [])
    if controller_ids and not kind.controller_quorum:
        raise ValueError(f"the {kind.name!r} kind has no controller quorum for dedicated "
                         "controllers")
    nodes = broker_ids + controller_ids
    voters = controller_ids or (broker_ids if kind.controller_quorum else [])
    peers = len(broker_ids) if kind.listener_per_peer else 0
    sizes = {node: (1 + peers if node in broker_ids else 0)
             + (len(nodes) if node in voters else 0) for node in nodes}
    free = iter(distinct_free_ports(sum(sizes.values()), host))
    allocated: dict[int, BrokerPorts] = {}
    for node in nodes:
        if node in broker_ids:
            client = next(free)
            inbound = ({source: next(free) for source in broker_ids} if kind.listener_per_peer
                       else dict.fromkeys(broker_ids, client))
        else:
            client, inbound = 0, {}
        controller = {source: next(free) for source in nodes} if node in voters else {}
        allocated[node] = BrokerPorts(client or controller[node], inbound, controller)
    return allocated


def fixed_ports(kind: BrokerKind, broker_ids: list[int], client: int, *,
                controller_ids: list[int] | None = None) -> dict[int, BrokerPorts]:
    """The same ports for every node, for backends that give each node an address of its
    own (containers): ``client`` for clients, and for a kind that takes every peer on a
    listener of its own, ``client + i`` for broker ``i``'s connections (ids start at 1); for
    a quorum kind the voters' controller listeners follow those, ``client + max(ids) + i`` for
    node ``i``'s Raft and controller requests, so no two listeners of a node share a port.
    The voters are every broker (combined), or the dedicated ``controller_ids``: those have
    only controller listeners, one per node, their own one their ``client`` port (the one the
    harness asks, as :func:`allocate_ports` gives them) — and the brokers then none."""
    controller_ids = list(controller_ids or [])
    if controller_ids and not kind.controller_quorum:
        raise ValueError(f"the {kind.name!r} kind has no controller quorum for dedicated "
                         "controllers")
    inbound = ({source: client + source for source in broker_ids} if kind.listener_per_peer
               else dict.fromkeys(broker_ids, client))
    last = max(broker_ids, default=0)
    nodes = broker_ids + controller_ids
    controller = ({source: client + last + source for source in nodes}
                  if kind.controller_quorum else {})
    ports = {broker_id: BrokerPorts(client, dict(inbound),
                                    {} if controller_ids else dict(controller))
             for broker_id in broker_ids}
    for controller_id in controller_ids:
        ports[controller_id] = BrokerPorts(controller[controller_id], {}, dict(controller))
    return ports


def properties_text(properties: Mapping[str, str | int]) -> str:
    """``key=value`` lines, the format of ``server.properties`` (and of ``zoo.cfg``)."""
    return "".join(f"{key}={value}\n" for key, value in properties.items())


def direct_wiring(ports: Mapping[int, BrokerPorts], hosts: Mapping[int, str],
                  zookeeper_connect: str) -> dict[int, BrokerWiring]:
    """Every node dialling every other at its own address: no proxy in between."""
    brokers = [node for node in ports if ports[node].inbound]
    voters = [node for node in ports if ports[node].controller]
    wiring: dict[int, BrokerWiring] = {}
    for me, mine in ports.items():
        wiring[me] = BrokerWiring(
            broker_id=me, host=hosts[me], ports=mine,
            advertised_client=f"{hosts[me]}:{mine.client}",
            dial=({j: f"{hosts[j]}:{ports[j].inbound[me]}" for j in brokers} if mine.inbound
                  else {}),
            dialled_at={i: f"{hosts[me]}:{mine.inbound[i]}" for i in mine.inbound},
            zookeeper_connect=zookeeper_connect,
            voters={j: f"{hosts[j]}:{ports[j].controller[me]}" for j in voters},
            voters_dial_me={i: f"{hosts[me]}:{mine.controller[i]}" for i in mine.controller})
    return wiring


def distinct_free_ports(count: int, host: str = LOOPBACK) -> list[int]:
    """``count`` free ports, all different (:func:`free_port` never hands one out twice)."""
    return [free_port(host) for _ in range(count)]
