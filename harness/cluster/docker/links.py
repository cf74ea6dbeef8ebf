"""The links of a docker run: which proxies its Toxiproxy container holds, and how each node is
wired to them.

Pure functions of the run's fixed addresses and ports, kept apart from
:mod:`harness.cluster.docker.backend` (which starts and stops containers) because this is the
part that must agree, name for name, with :class:`~harness.cluster.proxied.ProxiedCluster`: the
same links (``client->broker-I``, ``broker-I->broker-J``, ``broker-I->zk``) and, for a kind
whose nodes form a KRaft quorum, the same quorum channels (``broker-I->broker-J:controller``),
or with dedicated controllers the same links to them (``broker-I->controller-J``,
``controller-I->controller-J``), so :class:`~harness.cluster.proxy_faults.NetworkFaults` and
:class:`~harness.cluster.docker.faults.IptablesPartitions` cut the same traffic on either
backend.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from harness.cluster.kinds import BrokerKind, BrokerPorts, BrokerWiring
from harness.cluster.proxied import (
    CLIENT,
    ZOOKEEPER,
    broker_node,
    controller_link,
    link_name,
)

CLIENT_PROXY_PORT = 20000  # + broker id, inside the Toxiproxy container
BROKER_PROXY_PORT = 21000  # + an index over the node links (and their quorum channels)

Proxies = dict[str, tuple[int, str]]
"""Proxy name -> (its port in the Toxiproxy container, its upstream ``host:port``)."""


def node_name(node_id: int, controller_ids: Sequence[int] = ()) -> str:
    """What :meth:`ClusterSpec.node_name <harness.cluster.spec.ClusterSpec.node_name>` calls a
    node: ``controller-<id>`` for a dedicated controller, else ``broker-<id>``."""
    return f"controller-{node_id}" if node_id in controller_ids else broker_node(node_id)


def _controller_link(source: int, destination: int, controller_ids: Sequence[int]) -> str:
    return controller_link(node_name(source, controller_ids),
                           node_name(destination, controller_ids),
                           dedicated=destination in controller_ids)


def wanted_proxies(kind: BrokerKind, broker_ids: list[int], ports: Mapping[int, BrokerPorts],
                   addresses: Mapping[str, str], zookeeper_port: int, *,
                   controller_ids: Sequence[int] = ()) -> Proxies:
    """Every proxy of the run, in :meth:`ProxiedCluster.link_names` order: clients' links,
    broker to broker (each to the destination's listener for that source), broker to
    ZooKeeper (a kind that needs one), then the quorum's links from every node to every other
    voter (each to the destination's controller listener for that source: a channel of a
    combined pair's link, or the whole link to a dedicated controller), so the pair's proxy is
    the only way in. A dedicated controller dials no broker: it has no link to one."""
    wanted: Proxies = {}
    for broker_id in broker_ids:
        upstream = f"{addresses[broker_node(broker_id)]}:{ports[broker_id].client}"
        wanted[link_name(CLIENT, broker_node(broker_id))] = (CLIENT_PROXY_PORT + broker_id,
                                                             upstream)
    pairs = [(s, d) for s in broker_ids for d in broker_ids if s != d]
    upstreams: dict[str, str] = {
        link_name(broker_node(s), broker_node(d)):
            f"{addresses[broker_node(d)]}:{ports[d].inbound[s]}" for s, d in pairs}
    if kind.needs_zookeeper:
        for broker_id in broker_ids:
            upstreams[link_name(broker_node(broker_id), ZOOKEEPER)] = (
                f"{addresses[ZOOKEEPER]}:{zookeeper_port}")
    if kind.controller_quorum:
        nodes = [*broker_ids, *controller_ids]
        for s in nodes:
            for d in controller_ids or broker_ids:
                if s != d:
                    upstreams[_controller_link(s, d, controller_ids)] = (
                        f"{addresses[node_name(d, controller_ids)]}:{ports[d].controller[s]}")
    for index, (name, upstream) in enumerate(upstreams.items()):
        wanted[name] = (BROKER_PROXY_PORT + index, upstream)
    return wanted


def node_wiring(kind: BrokerKind, broker_id: int, broker_ids: list[int],
                ports: Mapping[int, BrokerPorts], addresses: Mapping[str, str],
                listen: Callable[[str], str], *,
                controller_ids: Sequence[int] = ()) -> BrokerWiring:
    """Node ``broker_id``'s wiring: a broker advertised at its client proxy, dialling every
    peer through the pair's proxy, ZooKeeper through its own; on a quorum kind every node
    reaches every voter (the brokers, or the dedicated ``controller_ids``) through the pair's
    proxy, and a voter is reached by every node at the proxy of that pair. A dedicated
    controller has no client, peer or ZooKeeper side. ``listen(proxy)`` is the address a
    proxy is dialled at.

    A node also sends requests to itself (a ZooKeeper-mode controller to its own inter-broker
    listener, a KRaft voter to its own controller listener): a proxy's address on the host's
    loopback would not reach it from inside its container, so it dials itself at its own
    listener, on its own address.
    """
    me = node_name(broker_id, controller_ids)
    host = addresses[me]
    mine = ports[broker_id]
    broker = broker_id in broker_ids
    voters = list(controller_ids or broker_ids)
    nodes = [*broker_ids, *controller_ids]

    def via(source: int, destination: int) -> str:
        if source == destination:
            return f"{addresses[broker_node(destination)]}:{ports[destination].inbound[source]}"
        return listen(link_name(broker_node(source), broker_node(destination)))

    def voter(source: int, destination: int) -> str:
        if source == destination:
            return (f"{addresses[node_name(destination, controller_ids)]}:"
                    f"{ports[destination].controller[source]}")
        return listen(_controller_link(source, destination, controller_ids))

    quorum = kind.controller_quorum
    return BrokerWiring(
        broker_id=broker_id, host=host, ports=mine,
        advertised_client=listen(link_name(CLIENT, me)) if broker else "",
        dial={j: via(broker_id, j) for j in broker_ids} if broker else {},
        dialled_at={i: via(i, broker_id) for i in broker_ids} if broker else {},
        zookeeper_connect=(listen(link_name(me, ZOOKEEPER))
                           if kind.needs_zookeeper and broker else ""),
        voters={j: voter(broker_id, j) for j in voters} if quorum else {},
        voters_dial_me=({i: voter(i, broker_id) for i in nodes}
                        if quorum and broker_id in voters else {}))
