"""A local cluster with every link behind a Toxiproxy proxy, so faults can be injected on demand.

Each TCP connection in the cluster goes through a named proxy (node and link names are the
harness's vocabulary, see :mod:`harness.cluster.proxy_faults`):

* ``client->broker-I`` — broker I advertises this proxy as its listener, so any Kafka client
  that bootstraps anywhere ends up talking to the brokers through the proxies;
* ``broker-I->broker-J`` — broker I reaches peer J here, and only broker I does (how the kind is
  told so is its own: ``broker.peer.addresses`` for the reference broker, a listener per source
  broker for Apache Kafka, see :mod:`harness.cluster.kinds`): controller requests, follower
  fetches, controlled shutdown — so a link can be cut one way or both;
* ``broker-I->zk`` — broker I's ``zookeeper.connect``;
* ``broker-I->broker-J:controller`` — for a kind whose nodes form a controller quorum (KRaft):
  node I's Raft requests and controller requests to node J's controller listener. It is a
  second channel of the link ``broker-I->broker-J``: a partition between the two nodes cuts
  both, a toxic on the link goes on both, and each channel can be named on its own.

The brokers' own listeners stay on their own ports (``direct_bootstrap``), and the harness reads
ZooKeeper directly, so an observer never sits behind a fault it is observing.

The Toxiproxy server is, in order of preference: the one ``toxiproxy_url`` or
``$TOXIPROXY_URL`` points at, else one this cluster starts as a child process in the run
directory (stopped with the cluster): the real ``toxiproxy-server`` — ``$TOXIPROXY_SERVER``, the
one ``ci/setup.sh`` builds into ``.harness/vendor/bin``, or one on PATH — and only without any
of those the project's own API-compatible server (``python -m harness.net.toxiproxy_server``);
:func:`harness.net.toxiproxy_process.find_toxiproxy_server` decides, and
:attr:`ProxiedCluster.toxiproxy_server` says which one runs. Proxies are created through the
toxiproxy-python client, so a real Toxiproxy and ours are driven by exactly the same calls.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Self
from urllib.parse import urlsplit

from toxiproxy import Toxiproxy
from toxiproxy.api import APIConsumer
from toxiproxy.proxy import Proxy

from harness.cluster.kinds import (
    BrokerKind,
    BrokerPorts,
    BrokerWiring,
    allocate_ports,
    distinct_free_ports,
)
from harness.cluster.local import LocalCluster
from harness.cluster.nodes import ClusterNodes
from harness.cluster.reference_kind import REFERENCE
from harness.cluster.spec import ClusterSpec
from harness.net.ports import LOOPBACK
from harness.net.toxiproxy_process import (
    TOXIPROXY_URL_ENV,
    ToxiproxyProcess,
    ToxiproxyServerInfo,
    ToxiproxyServerKind,
    fetch_version,
    find_toxiproxy_server,
    split_address,
)

ZOOKEEPER = "zk"
CLIENT = "client"

Link = tuple[str, int, str]
"""(listen host, listen port, upstream "host:port") of one proxy."""


def broker_node(broker_id: int) -> str:
    return f"broker-{broker_id}"


CONTROLLER_CHANNEL = "controller"
"""The channel of a link that carries a quorum node's Raft and controller traffic."""


def link_name(source: str, destination: str) -> str:
    """The proxy carrying connections ``source`` opens to ``destination``."""
    return f"{source}->{destination}"


def channel_name(link: str, channel: str) -> str:
    """The proxy carrying one more channel of ``link`` (``broker-1->broker-2:controller``)."""
    return f"{link}:{channel}"


def controller_link(source: str, destination: str, *, dedicated: bool) -> str:
    """The proxy carrying node ``source``'s Raft and controller requests to voter
    ``destination`` (both node names): a ``dedicated`` controller's links carry nothing else,
    a combined node's are a channel of the link between the two brokers."""
    link = link_name(source, destination)
    return link if dedicated else channel_name(link, CONTROLLER_CHANNEL)


def link_of(proxy: str) -> str:
    """The link a proxy belongs to: its own name, or the link whose channel it carries."""
    return proxy.partition(":")[0]


class ProxiedCluster:
    """A :class:`LocalCluster` whose every link goes through a Toxiproxy proxy.

    Without a ``run_dir`` a temporary one is made and removed by :meth:`stop`; a given one is
    kept (logs of ZooKeeper, brokers and the Toxiproxy server survive for inspection).
    :meth:`stop` lifts every fault first, so brokers can shut down in order, then stops the
    brokers, ZooKeeper, and the proxies (or the whole Toxiproxy server if this cluster started it).
    """

    def __init__(self, spec: ClusterSpec | None = None, run_dir: Path | str | None = None,
                 toxiproxy_url: str | None = None, *, kind: BrokerKind = REFERENCE) -> None:
        self.spec = spec or ClusterSpec()
        self.kind = kind
        self._given_run_dir = Path(run_dir) if run_dir is not None else None
        self._given_url = toxiproxy_url
        self._run_dir: Path | None = None
        self._server: ToxiproxyProcess | None = None
        self._url: str | None = None
        self._cluster: LocalCluster | None = None
        self.links: dict[str, Link] = {}
        self.proxies: dict[str, Proxy] = {}

    # --- what the cluster looks like -------------------------------------------------------

    @property
    def nodes(self) -> list[str]:
        zookeeper = [ZOOKEEPER] if self.kind.needs_zookeeper else []
        return [*zookeeper, *map(self.spec.node_name, self.spec.node_ids), CLIENT]

    @property
    def cluster(self) -> ClusterNodes:
        if self._cluster is None:
            raise RuntimeError("the cluster has not been started")
        return self._cluster

    @property
    def run_dir(self) -> Path:
        if self._run_dir is None:
            raise RuntimeError("the cluster has not been started")
        return self._run_dir

    @property
    def toxiproxy_url(self) -> str:
        if self._url is None:
            raise RuntimeError("the cluster has not been started")
        return self._url

    @property
    def toxiproxy(self) -> Toxiproxy:
        """The toxiproxy-python client, pointed at this cluster's server.

        The client keeps its server address as class state, so it is re-pointed on every
        access: two clusters in one process then each talk to their own server.
        """
        host, port = split_address(urlsplit(self.toxiproxy_url).netloc)
        client = Toxiproxy()
        client.update_api_consumer(host, port)
        return client

    def api(self) -> type[APIConsumer]:
        """The client's HTTP layer, pointed at this cluster's server, for the calls
        toxiproxy-python has no method for (``GET /proxies`` with every proxy's toxics)."""
        self.toxiproxy  # noqa: B018 - re-points the client's class state at our server
        return APIConsumer

    def proxy_states(self) -> dict[str, dict]:
        """``GET /proxies`` restricted to this cluster's links: name -> proxy with its toxics."""
        states = self.api().get("/proxies").json()
        return {name: state for name, state in states.items() if name in self.links}

    _external_server: ToxiproxyServerInfo | None = None  # set by _start_toxiproxy

    @property
    def toxiproxy_server(self) -> ToxiproxyServerInfo:
        """Which Toxiproxy server carries the proxies — real, built-in or external — and the
        version it answered at start (``.describe()`` gives ``real v2.12.0``)."""
        if self._url is None:
            raise RuntimeError("the cluster has not been started")
        if self._server is not None:
            return self._server.info
        if self._external_server is not None and self._external_server.url == self._url:
            return self._external_server
        # A subclass started a server of its own that is not our child (a container).
        return ToxiproxyServerInfo(ToxiproxyServerKind.EXTERNAL, self._url,
                                   fetch_version(self._url))

    @property
    def server_pid(self) -> int | None:
        """The pid of the Toxiproxy server this cluster started, None if it uses another's."""
        return self._server.pid if self._server is not None else None

    @property
    def bootstrap(self) -> str:
        """The client proxies, for ``bootstrap.servers``."""
        return ",".join(self._listen(link_name(CLIENT, broker_node(b)))
                        for b in self.spec.broker_ids)

    @property
    def direct_bootstrap(self) -> str:
        """The brokers' own listeners. Metadata still advertises the proxies, so a Kafka client
        bootstrapped here moves to them; raw requests stay direct."""
        return self.cluster.bootstrap

    def _listen(self, link: str) -> str:
        host, port, _ = self.links[link]
        return f"{host}:{port}"

    def link_names(self) -> list[str]:
        """Every proxy: clients' links first, then broker to broker, then broker to ZooKeeper,
        then the quorum's channels (``broker-I->broker-J:controller``)."""
        return list(self.links)

    def proxies_of(self, name: str) -> list[str]:
        """The proxies a fault named ``name`` goes on: a link's every channel, or one channel
        named whole; ValueError naming the links there are."""
        if name in self.links and name != link_of(name):
            return [name]  # one channel, named whole
        found = [proxy for proxy in self.links if link_of(proxy) == name]
        if not found:
            raise ValueError(f"unknown link {name!r}; links are {self.link_names()}")
        return found

    # --- lifecycle -------------------------------------------------------------------------

    def start(self) -> Self:
        """Toxiproxy, the proxies, then ZooKeeper and the brokers configured to use them.

        Ports of ZooKeeper and the brokers are chosen first, so every proxy exists (with a
        port of its own) before any node starts and tries to connect through it.
        """
        if self._cluster is not None:
            raise RuntimeError("the cluster is already started")
        if self._given_run_dir is not None:
            self._given_run_dir.mkdir(parents=True, exist_ok=True)
            self._run_dir = self._given_run_dir
        else:
            self._run_dir = Path(tempfile.mkdtemp(prefix="proxied-cluster-"))
        try:
            self._url = self._start_toxiproxy()
            zookeeper_port = distinct_free_ports(1)[0] if self.kind.needs_zookeeper else None
            broker_ports = allocate_ports(self.kind, self.spec.broker_ids,
                                          controller_ids=self.spec.controller_ids)
            self._create_proxies(zookeeper_port, broker_ports)
            self._cluster = LocalCluster(self.spec, run_dir=self._run_dir, kind=self.kind,
                                         zookeeper_port=zookeeper_port, ports=broker_ports,
                                         wiring=self._proxied_wiring(broker_ports))
            self._cluster.start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_toxiproxy(self) -> str:
        """The URL of the server given (``toxiproxy_url``, ``$TOXIPROXY_URL``), else of the one
        :func:`find_toxiproxy_server` picks, started here."""
        url = self._given_url or os.environ.get(TOXIPROXY_URL_ENV)
        if url:
            url = url.rstrip("/")
            self._external_server = ToxiproxyServerInfo(ToxiproxyServerKind.EXTERNAL, url,
                                                        fetch_version(url))
            return url
        self._server = ToxiproxyProcess(self.run_dir / "toxiproxy", find_toxiproxy_server())
        return self._server.start()

    def _create_proxies(self, zookeeper_port: int | None,
                        broker_ports: dict[int, BrokerPorts]) -> None:
        """One proxy per link; a proxy of the same name left on a shared server by a crashed
        run is replaced, as Toxiproxy's own ``populate`` does."""
        upstreams: dict[str, int] = {}
        for broker_id in self.spec.broker_ids:
            upstreams[link_name(CLIENT, broker_node(broker_id))] = broker_ports[broker_id].client
        for source in self.spec.broker_ids:
            for destination in self.spec.broker_ids:
                if source != destination:
                    upstreams[link_name(broker_node(source), broker_node(destination))] = (
                        broker_ports[destination].inbound[source])
        for broker_id in self.spec.broker_ids:
            if zookeeper_port is not None:
                upstreams[link_name(broker_node(broker_id), ZOOKEEPER)] = zookeeper_port
        for source in self.spec.node_ids:
            for destination in self.spec.voter_ids:
                controller = broker_ports[destination].controller
                if source != destination and controller:
                    upstreams[self._controller_link(source, destination)] = controller[source]
        client = self.toxiproxy
        existing = client.proxies()
        for name, port in upstreams.items():
            if name in existing:
                existing[name].destroy()
            proxy = client.create(upstream=f"{LOOPBACK}:{port}", name=name,
                                  listen=f"{LOOPBACK}:0")
            self.proxies[name] = proxy
            host, listen_port = split_address(proxy.listen)
            self.links[name] = (host, listen_port, proxy.upstream)

    def _proxied_wiring(self, ports: dict[int, BrokerPorts]) -> dict[int, BrokerWiring]:
        """Each broker advertised at its client proxy, dialling each peer through the pair's
        proxy and ZooKeeper through its own; a broker reaches itself directly."""
        def via(source: int, destination: int) -> str:
            if source == destination:
                return f"{LOOPBACK}:{ports[destination].inbound[source]}"
            return self._listen(link_name(broker_node(source), broker_node(destination)))

        def voter(source: int, destination: int) -> str:
            if source == destination:
                return f"{LOOPBACK}:{ports[destination].controller[source]}"
            return self._listen(self._controller_link(source, destination))

        wiring: dict[int, BrokerWiring] = {}
        brokers, voters = self.spec.broker_ids, self.spec.voter_ids
        quorum = self.kind.controller_quorum
        for me in self.spec.node_ids:
            node = self.spec.node_name(me)
            broker = me in brokers
            wiring[me] = BrokerWiring(
                broker_id=me, host=LOOPBACK, ports=ports[me],
                advertised_client=(self._listen(link_name(CLIENT, node)) if broker else ""),
                dial={j: via(me, j) for j in brokers} if broker else {},
                dialled_at={i: via(i, me) for i in brokers} if broker else {},
                zookeeper_connect=(self._listen(link_name(node, ZOOKEEPER))
                                   if self.kind.needs_zookeeper else ""),
                voters={j: voter(me, j) for j in voters} if quorum else {},
                voters_dial_me=({i: voter(i, me) for i in self.spec.node_ids}
                                if quorum and me in voters else {}))
        return wiring

    def _controller_link(self, source: int, destination: int) -> str:
        """The proxy carrying ``source``'s Raft and controller requests to voter
        ``destination`` (:func:`controller_link`)."""
        return controller_link(self.spec.node_name(source), self.spec.node_name(destination),
                               dedicated=destination in self.spec.controller_ids)

    def lift_all_faults(self) -> None:
        """Remove every toxic and enable every proxy of this cluster (others' are untouched)."""
        for state in self.proxy_states().values():
            proxy = Proxy(**state)
            for toxic in state.get("toxics") or []:
                proxy.destroy_toxic(toxic["name"])
            if not state.get("enabled", True):
                proxy.enable()

    def stop(self) -> None:
        """Lift faults, stop brokers and ZooKeeper, then the proxies. Safe to call twice."""
        try:
            if self._url is not None and self.links:
                with contextlib.suppress(Exception):  # a dead server must not block the stop
                    self.lift_all_faults()
            if self._cluster is not None:
                self._cluster.stop()
        finally:
            self._cluster = None
            self._stop_proxies()
            if self._given_run_dir is None and self._run_dir is not None:
                shutil.rmtree(self._run_dir, ignore_errors=True)
            self._run_dir = None

    def _stop_proxies(self) -> None:
        if self._server is not None:
            self._server.stop()  # closes every proxy it holds
            self._server = None
        elif self._url is not None:
            with contextlib.suppress(Exception):
                self.api()
                for proxy in self.proxies.values():
                    proxy.destroy()
        self.proxies.clear()
        self.links.clear()
        self._url = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def log_paths(self) -> list[Path]:
        """Every node's log plus the Toxiproxy server's, if this cluster started one."""
        paths = self.cluster.log_paths() if self._cluster is not None else []
        if self._server is not None:
            paths.append(self._server.log_path)
        return paths
