"""The docker backend: ZooKeeper, N brokers of one kind and Toxiproxy, each in its own container
(no ZooKeeper for a kind without one: a KRaft quorum's nodes are their own controllers, or
``spec.controllers`` dedicated ones, ``controller-<id>``, each in a container of its own too).

The same cluster as :class:`~harness.cluster.proxied.ProxiedCluster`, with the same link names
and the same Toxiproxy API, so :class:`~harness.cluster.proxy_faults.NetworkFaults` drives it
unchanged; only where the nodes run differs:

* one user-defined bridge network per run, with a subnet of its own and fixed addresses, so
  every proxy can name its upstream before the node behind it starts;
* only the Toxiproxy container publishes ports, on 127.0.0.1: its API, ``client->broker-I``
  (advertised by broker I, so a host client always goes through it) and ``harness->zk``, an
  observer link no fault touches, for reading ZooKeeper as the local backend does;
* brokers reach each other and ZooKeeper only through proxies in that container, so a link
  can be cut one way or both: the broker kind (:mod:`harness.cluster.kinds`) turns the wiring
  into its own keys (``broker.peer.addresses`` for the reference broker; for Apache Kafka a
  listener per source broker, on port ``9092 + source``, each advertised at that pair's proxy;
  for KRaft also a controller listener per source node behind the link's ``:controller``
  channel — or, to a dedicated controller, behind the whole link ``broker-I->controller-J``
  or ``controller-I->controller-J`` — :mod:`harness.cluster.docker.links`, so a cut reaches
  the quorum's Raft traffic);
* the cluster state is read where the local backend reads it: ZooKeeper through an observer
  link, a KRaft quorum on the nodes' own listeners on the run's network (:attr:`reads`);
* what a broker container runs is the kind's too (:meth:`BrokerKind.container_launch`): the
  reference broker from the image, Apache Kafka's JVM on the image's JRE from the jars the
  image carries (:meth:`BrokerKind.image_directories`);
* :class:`~harness.cluster.docker.faults.IptablesPartitions` cuts the same links a second way,
  in the kernel: DROP rules in the network namespace of the node that owns the link's end;
* process faults are the engine's: kill, stop (SIGTERM, then SIGKILL), pause and unpause (the
  cgroup freezer: a SIGSTOP no process can notice), start again with its data (each broker's
  log dir is a volume of the run, so lose-unflushed can cut it from the host);
* every node has a :class:`DockerNode` handle (``zookeeper``, ``brokers``, ``controllers``,
  ``broker(id)`` for either of the last two)
  offering what a local process handle offers, so the suites, ``Target.reset``, the supervisor
  and :mod:`harness.nemesis.process` drive either backend the same way.

Everything the run creates carries the label ``kafka-harness.run=<id>``; :meth:`stop`, an
``atexit`` hook and SIGTERM remove all of it, so nothing outlives ``down``, Ctrl-C or a failed
test (:func:`remove_run` cleans up after a process that was SIGKILLed). Each object also names
its owner process, so the next docker cluster to start removes the runs of dead owners
(:mod:`harness.cluster.docker.reaping`), should the harness's watchdog have died too.
"""

from __future__ import annotations

import atexit
import contextlib
import ipaddress
import os
import shlex
import shutil
import signal
import tempfile
import urllib.request
import uuid
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any, Self

import docker
import docker.errors
from docker.models.containers import Container

from harness.cluster.docker.engine import ensure_engine
from harness.cluster.docker.images import build_project_image, ensure_base_image
from harness.cluster.docker.links import CLIENT_PROXY_PORT, node_wiring, wanted_proxies
from harness.cluster.docker.nodes import DATA_DIR, LOG_DIR, DockerNode
from harness.cluster.docker.reaping import (
    OWNER_LABEL,
    RUN_LABEL,
    owner_label,
    reap_dead_runs,
    remove_run,
    remove_run_of,
)
from harness.cluster.errors import PeerStartError
from harness.cluster.kinds import (
    BrokerKind,
    BrokerPorts,
    ContainerLaunch,
    distinct_free_ports,
    fixed_ports,
    properties_text,
)
from harness.cluster.kraft_state import Address, KraftState
from harness.cluster.local import metadata_broker_ids
from harness.cluster.nodes import wait_until_whole
from harness.cluster.proxied import CLIENT, ZOOKEEPER, ProxiedCluster, broker_node, link_name
from harness.cluster.reference_kind import REFERENCE
from harness.cluster.spec import ClusterSpec
from harness.cluster.state import AdminState, ClusterState, ZooKeeperState, ZooKeeperStateReads
from harness.cluster.zookeeper import four_letter_word
from harness.lifecycle import reaper
from harness.net.ports import LOOPBACK, is_accepting
from harness.waiting import wait_for

NODE_LABEL = "kafka-harness.node"
TOXIPROXY_IMAGE_ENV = "KAFKA_HARNESS_TOXIPROXY_IMAGE"
TOXIPROXY_NODE = "toxiproxy"
OBSERVER_LINK = "harness->zk"
API_PORT = 8474
BROKER_PORT = 9092  # a broker's client listener; its per-source ones follow (kinds.fixed_ports)
ZOOKEEPER_PORT = 2181
OBSERVER_PORT = 22000
_ZOOKEEPER_JARS = "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar"


class DockerCluster(ProxiedCluster, ZooKeeperStateReads):
    """A :class:`ProxiedCluster` whose nodes and Toxiproxy server are containers.

    ``image`` defaults to the project image for the current sources (built if missing, see
    :mod:`harness.cluster.docker.images`); ``toxiproxy_image`` (or
    ``$KAFKA_HARNESS_TOXIPROXY_IMAGE``) names the real Toxiproxy image on machines that have
    one, instead of the built-in server. Without ``run_dir`` the logs go to a temporary one,
    removed by :meth:`stop`; a given one keeps every node's log. ``kind`` is the brokers'
    kind (the reference broker unless told).
    """

    def __init__(self, spec: ClusterSpec | None = None, run_dir: Path | str | None = None, *,
                 image: str | None = None, toxiproxy_image: str | None = None,
                 client: docker.DockerClient | None = None,
                 kind: BrokerKind = REFERENCE) -> None:
        super().__init__(spec, run_dir, kind=kind)
        # Every container has an address of its own, so every node of a role has the same
        # ports.
        self.ports: dict[int, BrokerPorts] = fixed_ports(
            kind, self.spec.broker_ids, BROKER_PORT, controller_ids=self.spec.controller_ids)
        self.image = image
        self.toxiproxy_image = toxiproxy_image or os.environ.get(TOXIPROXY_IMAGE_ENV)
        self.client = client
        self.run_id = uuid.uuid4().hex[:10]
        self.containers: dict[str, Container] = {}
        self.addresses: dict[str, str] = {}
        self.subnet = ""
        self._network_name = f"kafka-harness-{self.run_id}"
        self._published: dict[int, int] = {}
        self._paused: set[int] = set()
        self.zookeeper: DockerNode | None = None
        self.brokers: dict[int, DockerNode] = {}
        self.controllers: dict[int, DockerNode] = {}  # dedicated KRaft controllers
        self._state: ZooKeeperState | None = None
        self._kraft_state: KraftState | None = None
        self._admin_state: AdminState | None = None
        self._started = False
        self._previous_sigterm: Any = None
        self._ledger_entry: int | None = None
        self._owner = owner_label()

    # --- what the cluster looks like -------------------------------------------------------

    @property
    def cluster(self) -> Self:
        """The process-fault surface a :class:`LocalCluster` offers lives on this object."""
        if not self._started:
            raise RuntimeError("the cluster has not been started")
        return self

    @property
    def labels(self) -> dict[str, str]:
        """The run's id, and its owner (this process) for :mod:`harness.cluster.docker.reaping`."""
        return {RUN_LABEL: self.run_id, OWNER_LABEL: self._owner}

    @property
    def label_selector(self) -> str:
        """What ``docker ps --filter label=...`` takes to list everything of this run."""
        return f"{RUN_LABEL}={self.run_id}"

    @property
    def network_name(self) -> str:
        return self._network_name

    @property
    def zookeeper_connect(self) -> str | None:
        """ZooKeeper for the harness and its user, through the observer link no fault cuts;
        None for a kind that runs without ZooKeeper (KRaft)."""
        if not self.kind.needs_zookeeper:
            return None
        return f"{LOOPBACK}:{self._published[OBSERVER_PORT]}"

    @property
    def direct_bootstrap(self) -> str:
        """The brokers' own listeners on the run's network (reachable from a Linux host)."""
        return ",".join(f"{self.addresses[broker_node(b)]}:{BROKER_PORT}"
                        for b in self.spec.broker_ids)

    @property
    def paused(self) -> frozenset[int]:
        return frozenset(self._paused)

    # --- lifecycle -------------------------------------------------------------------------

    def start(self) -> Self:
        """Network, Toxiproxy and its proxies, ZooKeeper (a kind that needs one), then every
        broker and dedicated controller at once; returns when each broker's Metadata (asked
        through its client proxy) lists every broker — which, with dedicated controllers,
        also means their quorum has a leader the brokers registered with."""
        if self._started:
            raise RuntimeError("the cluster is already started")
        self._run_dir = (self._given_run_dir if self._given_run_dir is not None
                         else Path(tempfile.mkdtemp(prefix="docker-cluster-")))
        self._run_dir.mkdir(parents=True, exist_ok=True)
        self._started = True
        # Removed by the harness's watchdog should the harness die without stopping it.
        self._ledger_entry = reaper.register(remove_run_of, self.run_id)
        atexit.register(self.stop)
        self._install_sigterm_handler()
        try:
            self.client = self.client or ensure_engine()
            reap_dead_runs(self.client)  # containers of runs whose owner died unreaped
            self.image = self.image or build_project_image(self.client,
                                                           ensure_base_image(self.client))
            self._create_network()
            self._url = self._start_toxiproxy()
            self._create_proxies_in_container()
            if self.kind.needs_zookeeper:
                self._start_zookeeper()
            for node_id in self.spec.node_ids:
                node = self.spec.node_name(node_id)
                self._add_node_handle(node_id)
                launch = self.kind.container_launch(self._broker_properties(node_id),
                                                    DATA_DIR)
                self._run_configured(node, launch, volume=self._create_volume(node))
            wait_until_whole(self, self.spec.startup_timeout, "after the start")
        except docker.errors.DockerException as exc:
            self.stop()
            raise PeerStartError(f"the docker engine refused: {exc}") from exc
        except BaseException:
            self.stop()
            raise
        return self

    def _add_node_handle(self, node_id: int) -> None:
        """The handle of a broker (it serves once its Metadata lists itself) or of a dedicated
        controller (it serves no Metadata: it is up once its own listener accepts, as
        :class:`~harness.cluster.kraft.KraftNode` waits for one on the local backend)."""
        node = self.spec.node_name(node_id)
        if node_id in self.spec.broker_ids:
            self.brokers[node_id] = DockerNode(
                self, node, BROKER_PORT, partial(self.lists_brokers, node_id, {node_id}),
                stop_timeout=self.spec.broker_stop_timeout)
            return
        port = self.ports[node_id].client
        self.controllers[node_id] = DockerNode(
            self, node, port, lambda: is_accepting(self.addresses[node], port),
            stop_timeout=self.spec.broker_stop_timeout)

    def _create_network(self) -> None:
        """A bridge network with a subnet the engine picked free, pinned so addresses can be
        fixed: the engine only lets containers choose addresses on a subnet given explicitly."""
        assert self.client is not None
        probe = self.client.networks.create(self._network_name, driver="bridge",
                                            labels=self.labels)
        probe.reload()
        self.subnet = probe.attrs["IPAM"]["Config"][0]["Subnet"]
        probe.remove()
        pool = docker.types.IPAMPool(subnet=self.subnet)
        self.client.networks.create(self._network_name, driver="bridge", labels=self.labels,
                                    ipam=docker.types.IPAMConfig(pool_configs=[pool]))
        hosts = ipaddress.ip_network(self.subnet).hosts()
        for _ in range(9):
            next(hosts)  # the gateway and a few spare addresses come first
        for node in (TOXIPROXY_NODE, ZOOKEEPER, *map(self.spec.node_name, self.spec.node_ids)):
            self.addresses[node] = str(next(hosts))

    def _create_volume(self, node: str) -> str:
        """A labelled volume for a broker's log dir: removed with the run, and reachable from
        the host (as root) while the container is stopped, for lose-unflushed."""
        assert self.client is not None
        return str(self.client.volumes.create(f"kafka-harness-{self.run_id}-{node}-data",
                                              labels=self.labels).name)

    def _run_node(self, node: str, command: list[str], *, image: str | None = None,
                  environment: Mapping[str, str] | None = None,
                  ports: Mapping[int, int] | None = None,
                  volume: str | None = None) -> Container:
        assert self.client is not None
        api = self.client.api
        host_config = api.create_host_config(
            cap_add=["NET_ADMIN"],
            binds={volume: {"bind": LOG_DIR, "mode": "rw"}} if volume else None,
            port_bindings={port: (LOOPBACK, host_port)
                           for port, host_port in (ports or {}).items()})
        networking = api.create_networking_config({
            self._network_name: api.create_endpoint_config(ipv4_address=self.addresses[node])})
        created = api.create_container(
            image or self.image, command=command, name=f"kafka-harness-{self.run_id}-{node}",
            hostname=node, labels={**self.labels, NODE_LABEL: node},
            environment=dict(environment or {}), ports=list(ports or {}),
            volumes=[LOG_DIR] if volume else None,
            host_config=host_config, networking_config=networking)
        container = self.client.containers.get(created["Id"])
        self.containers[node] = container
        container.start()
        return container

    def _start_toxiproxy(self) -> str:
        observer = [OBSERVER_PORT] if self.kind.needs_zookeeper else []
        ports = [API_PORT, *observer, *(CLIENT_PROXY_PORT + b for b in self.spec.broker_ids)]
        self._published = dict(zip(ports, distinct_free_ports(len(ports)), strict=True))
        if self.toxiproxy_image:
            self._run_node(TOXIPROXY_NODE, ["-host=0.0.0.0", f"-port={API_PORT}"],
                           image=self.toxiproxy_image, ports=self._published)
        else:
            self._run_node(TOXIPROXY_NODE, [
                "python", "-m", "harness.net.toxiproxy_server",
                "--allow-network", self.subnet, "--host", self.addresses[TOXIPROXY_NODE],
                "--port", str(API_PORT)], ports=self._published)
        url = f"http://{LOOPBACK}:{self._published[API_PORT]}"
        self.wait_for(lambda: _http_ok(f"{url}/version"), self.spec.startup_timeout,
                      "the Toxiproxy container's API")
        return url

    def _create_proxies_in_container(self) -> None:
        """The links of :class:`ProxiedCluster` (:func:`wanted_proxies`), listening in the
        Toxiproxy container; a client link's address is the host side of its published port.
        With ZooKeeper, also the observer link to it, which no fault touches."""
        here = self.addresses[TOXIPROXY_NODE]
        wanted = wanted_proxies(self.kind, self.spec.broker_ids, self.ports, self.addresses,
                                ZOOKEEPER_PORT, controller_ids=self.spec.controller_ids)
        client = self.toxiproxy
        for name, (port, upstream) in wanted.items():
            proxy = client.create(upstream=upstream, name=name, listen=f"{here}:{port}")
            self.proxies[name] = proxy
            published = self._published.get(port)
            self.links[name] = ((LOOPBACK, published, upstream) if published is not None
                                else (here, port, upstream))
        if self.kind.needs_zookeeper:
            # Not a link: faults never touch it, so reading ZooKeeper never sits behind one.
            client.create(upstream=f"{self.addresses[ZOOKEEPER]}:{ZOOKEEPER_PORT}",
                          name=OBSERVER_LINK, listen=f"{here}:{OBSERVER_PORT}")

    def _start_zookeeper(self) -> None:
        config: dict[str, str | int] = {
            "tickTime": 200, "dataDir": f"{DATA_DIR}/zookeeper", "clientPort": ZOOKEEPER_PORT,
            "clientPortAddress": self.addresses[ZOOKEEPER], "minSessionTimeout": 400,
            "maxSessionTimeout": 60_000, "maxClientCnxns": 0, "admin.enableServer": "false",
            "4lw.commands.whitelist": "ruok,srvr,stat,mntr,cons",
        }
        java = ("java", "-Xms64m", "-Xmx256m", "-XX:+UseSerialGC",
                "-Dzookeeper.jmx.log4j.disable=true", "-cp", _ZOOKEEPER_JARS,
                "org.apache.zookeeper.server.quorum.QuorumPeerMain", f"{DATA_DIR}/zoo.cfg")
        port = self._published[OBSERVER_PORT]
        self.zookeeper = DockerNode(
            self, ZOOKEEPER, ZOOKEEPER_PORT,
            lambda: "Mode: " in four_letter_word(LOOPBACK, port, "srvr"))
        self._run_configured(ZOOKEEPER, ContainerLaunch(java, {"zoo.cfg": properties_text(config)}))
        self.wait_for(self.zookeeper.ready, self.spec.startup_timeout, "ZooKeeper to serve")

    def _broker_properties(self, broker_id: int) -> dict[str, str | int]:
        """The local backend's properties for a node (a broker or a dedicated controller),
        pointed at the proxies (:func:`node_wiring`), listening on the container's own
        address, the kind's wiring keys made from that."""
        wiring = node_wiring(self.kind, broker_id, self.spec.broker_ids, self.ports,
                             self.addresses, self._listen,
                             controller_ids=self.spec.controller_ids)
        return {**self.spec.server_properties(broker_id, wiring.zookeeper_connect,
                                              self.kind.wiring_properties(wiring)),
                "log.dirs": LOG_DIR}

    def _run_configured(self, node: str, launch: ContainerLaunch,
                        volume: str | None = None) -> Container:
        """Run ``launch.command`` in a node container after writing ``launch.files`` to
        ``DATA_DIR`` (their text passed in the environment, so nothing needs copying in, and a
        restarted container writes them again before it execs the node)."""
        environment = {f"FILE_{n}": text for n, text in enumerate(launch.files.values())}
        writes = [f'printf "%s" "$FILE_{n}" > {shlex.quote(f"{DATA_DIR}/{name}")}'
                  for n, name in enumerate(launch.files)]
        script = " && ".join([*writes, f"exec {shlex.join(launch.command)}"])
        return self._run_node(node, ["sh", "-c", script], environment=environment,
                              volume=volume)

    def stop(self) -> None:
        """Save every node's log, then remove everything labelled with this run — the brokers'
        containers before the dedicated controllers' (as the local backend stops them: no
        broker is left without a quorum), then the rest. Safe to call twice, and from
        ``atexit`` or a signal."""
        if not self._started:
            return
        self._started = False
        atexit.unregister(self.stop)
        try:
            self._close_reader()
            self._kraft_state = None
            self._admin_state = None
            if self._given_run_dir is not None:
                with contextlib.suppress(Exception):
                    self._save_logs()
        finally:
            if self.client is not None:
                for node in map(self.spec.node_name, self.spec.node_ids):
                    if node in self.containers:
                        with contextlib.suppress(docker.errors.NotFound):
                            self.containers[node].remove(force=True, v=True)
                remove_run(self.client, self.run_id)
            reaper.release(self._ledger_entry)
            self._ledger_entry = None
            self._restore_sigterm_handler()
            self.containers.clear()
            self.zookeeper = None
            self.brokers.clear()
            self.controllers.clear()
            self.proxies.clear()
            self.links.clear()
            self._paused.clear()
            self._url = None
            if self._given_run_dir is None and self._run_dir is not None:
                shutil.rmtree(self._run_dir, ignore_errors=True)
            self._run_dir = None

    def _install_sigterm_handler(self) -> None:
        """SIGTERM becomes SystemExit, so ``with`` blocks and ``finally`` clean up as on Ctrl-C
        (only from the main thread, and only if nobody else handles SIGTERM)."""
        with contextlib.suppress(ValueError):
            if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
                self._previous_sigterm = signal.signal(signal.SIGTERM, _exit_on_sigterm)

    def _restore_sigterm_handler(self) -> None:
        if self._previous_sigterm is not None:
            with contextlib.suppress(ValueError):
                signal.signal(signal.SIGTERM, self._previous_sigterm)
            self._previous_sigterm = None

    def _save_logs(self) -> None:
        for node, container in self.containers.items():
            (self.run_dir / f"{node}.log").write_bytes(container.logs())

    def log_paths(self) -> list[Path]:
        """Every container's log, written to the run directory now (ZooKeeper first)."""
        if not self._started:
            return []
        self._save_logs()
        return [self.run_dir / f"{node}.log" for node in self.containers]

    # --- process faults --------------------------------------------------------------------

    def broker(self, broker_id: int) -> DockerNode:
        """The container of node ``broker_id``: a broker, or a dedicated controller (process
        faults take either by its node id, as on the local backend)."""
        node = self.brokers.get(broker_id) or self.controllers.get(broker_id)
        if node is None:
            raise KeyError(f"no node {broker_id}; nodes are {self.spec.node_ids}")
        return node

    def kill(self, broker_id: int) -> int | None:
        """SIGKILL: a crash. Its ZooKeeper session lives on until the session timeout."""
        self._paused.discard(broker_id)
        return self.broker(broker_id).kill()

    def stop_broker(self, broker_id: int) -> int | None:
        """SIGTERM (controlled shutdown), SIGKILL after ``broker_stop_timeout``; exit code."""
        self._paused.discard(broker_id)
        return self.broker(broker_id).stop()

    def start_broker(self, broker_id: int, *, wait_for_deregistration: bool = True) -> None:
        """Start a stopped or killed broker's container again: same address, same data.

        Waits as the local backend does: with ZooKeeper, for a killed broker's old znode to
        expire first (a broker refuses to start while its id is registered by another
        session); then for the broker to be registered — in ZooKeeper, or on a KRaft quorum
        unfenced in the active controller's metadata image (a restarted node registers with a
        new incarnation and is unfenced once it has caught up with the metadata log) — and
        for its own Metadata to list it. A dedicated controller registers nowhere: once its
        listener accepts, this waits for the quorum to have a leader."""
        broker = self.broker(broker_id)
        if broker.is_running():
            raise RuntimeError(f"broker {broker_id} is already running "
                               f"(container {broker.container_id})")
        if wait_for_deregistration and self.kind.needs_zookeeper:  # a znode outlives a crash
            timeout = self.spec.zookeeper_session_timeout_ms / 1000 + 10
            self.wait_for(lambda: self.broker_registration(broker_id) is None, timeout,
                          f"the old registration of broker {broker_id} to expire")
        broker.start()
        if broker_id in self.controllers:
            self.wait_for(self._quorum_has_leader, self.spec.startup_timeout,
                          "the quorum to have a leader")
            return
        where = "ZooKeeper" if self.kind.needs_zookeeper else "the quorum's metadata"
        self.wait_for(lambda: self.broker_registration(broker_id) is not None,
                      self.spec.startup_timeout, f"broker {broker_id} to register in {where}")
        self.wait_for(lambda: broker_id in self.broker_metadata(broker_id),
                      self.spec.startup_timeout, f"broker {broker_id}'s Metadata to list itself")

    def _quorum_has_leader(self) -> bool:
        try:
            return self.controller_id() is not None
        except ConnectionError:
            return False

    def pause(self, broker_id: int) -> None:
        """Freeze every process of the container: it hangs with its connections open."""
        self.broker(broker_id).pause()
        self._paused.add(broker_id)

    def resume(self, broker_id: int) -> None:
        self.broker(broker_id).resume()
        self._paused.discard(broker_id)

    def running_broker_ids(self) -> list[int]:
        """Brokers whose container runs (paused ones included)."""
        return [b for b, broker in self.brokers.items() if broker.is_running()]

    # --- reading the cluster ---------------------------------------------------------------

    @property
    def state(self) -> ZooKeeperState:
        """The cluster's state in ZooKeeper, read through the observer link (never faulted)."""
        connect = self.zookeeper_connect
        if connect is None:
            raise RuntimeError(f"the {self.kind.name!r} kind runs without ZooKeeper")
        if self._state is None:
            self._state = ZooKeeperState(connect)
        return self._state

    @property
    def reads(self) -> ClusterState:
        """Where the cluster-state questions are answered, as on the local backend: ZooKeeper;
        for a KRaft quorum the nodes' own client and controller listeners on the run's network
        (:class:`KraftState`); for another kind without ZooKeeper the Admin API.

        The nodes' own addresses are the observer's links: the host routes to the run's
        bridge network (CI's docker job shares the host's network too), and no fault touches
        that path — a partition drops only traffic to and from a proxy's port in the Toxiproxy
        container, a toxic sits on a proxy — so a node cut off from the quorum still answers
        what it believes, and the harness sees the minority's past beside the majority's
        present instead of a timeout."""
        if self.kind.needs_zookeeper:
            return self.state
        if not self._started:
            raise RuntimeError("the cluster has not been started")
        if self.kind.controller_quorum:
            if self._kraft_state is None:
                self._kraft_state = KraftState(self._running_addresses,
                                               self._running_controllers)
            return self._kraft_state
        if self._admin_state is None:
            self._admin_state = AdminState(self.bootstrap)
        return self._admin_state

    def _serving(self, node_ids: list[int]) -> list[int]:
        """Those of ``node_ids`` whose container runs and is not paused (a frozen one answers
        nothing)."""
        nodes = {**self.brokers, **self.controllers}
        return [n for n in node_ids
                if n in nodes and n not in self._paused and nodes[n].status() == "running"]

    def _running_addresses(self) -> dict[int, Address]:
        """The own client listeners of the serving brokers, by id."""
        return {b: (self.brokers[b].host, self.brokers[b].port)
                for b in self._serving(self.spec.broker_ids)}

    def _running_controllers(self) -> list[Address]:
        """The own controller listeners (each voter's listener for itself) of the serving
        voters: the dedicated controllers, or every broker of a combined quorum."""
        return [(self.broker(v).host, self.ports[v].controller[v])
                for v in self._serving(self.spec.voter_ids) if self.ports[v].controller]

    def lists_brokers(self, broker_id: int, expected: set[int]) -> bool:
        """Whether ``broker_id``'s Metadata, asked through its proxy, lists ``expected``."""
        return self.broker_metadata(broker_id) >= expected

    def broker_metadata(self, broker_id: int) -> set[int]:
        """The broker ids ``broker_id`` lists in its own Metadata, asked through its proxy."""
        host, port, _ = self.links[link_name(CLIENT, broker_node(broker_id))]
        return metadata_broker_ids(host, port)

    def wait_for(self, predicate: Callable[[], Any], timeout: float, what: str, *,
                 interval: float = 0.1) -> Any:
        context = f"logs: docker logs kafka-harness-{self.run_id}-<node>"
        return wait_for(predicate, timeout, what, interval=interval, context=context)


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1.0) as response:
            return response.status == 200
    except OSError:
        return False


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)
