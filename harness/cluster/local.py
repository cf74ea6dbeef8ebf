"""The local backend: a real ZooKeeper and N brokers of one kind as child processes, one run dir.

This is Kafka's ZooKeeper mode as the seeds describe it, on one machine: every broker — the
reference broker (``python -m reference_broker``) or Apache Kafka (``kafka.Kafka`` on its jars)
— is its own process with its own data directory and ports, and they find each other only
through ZooKeeper (``/brokers/ids``, ``/controller``). Nothing is shared in memory, so a
SIGKILL, a SIGSTOP or a restart is exactly what it would be on a real cluster — which is what
the failover and unclean-election suites need to exercise.

Layout of the run directory::

    <run_dir>/zookeeper/         zoo.cfg, data/, zookeeper.log
    <run_dir>/broker-<id>/       server.properties, data/, reference.log or kafka.log

The cluster reads ZooKeeper itself (:mod:`harness.cluster.state`, with kazoo, as any Kafka
operator's tooling would) to answer "who is the controller" or "what is this partition's state":
these are the facts the suites assert on, and asking a broker would test the broker with itself.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from types import TracebackType
from typing import Self, TypeVar

from harness.cluster.kinds import (
    BrokerKind,
    BrokerNodeProcess,
    BrokerPorts,
    BrokerWiring,
    allocate_ports,
    direct_wiring,
)
from harness.cluster.kraft_state import KraftState
from harness.cluster.nodes import wait_until_whole
from harness.cluster.reference_kind import REFERENCE
from harness.cluster.spec import ClusterSpec
from harness.cluster.state import AdminState, ClusterState, ZooKeeperState, ZooKeeperStateReads
from harness.cluster.zookeeper import ZooKeeperServer
from harness.disk.broker_disk import BrokerDisk, DiskLayer
from harness.net.ports import LOOPBACK
from harness.raw_client import raw_metadata
from harness.waiting import POLL_INTERVAL_S, wait_for

T = TypeVar("T")

def metadata_broker_ids(host: str, port: int, timeout: float = 5.0) -> set[int]:
    """The broker ids one broker's own Metadata answer lists (no topics asked for).

    A raw request rather than a Kafka client: a client would ask whichever broker it likes, and
    the question here is what *this* broker believes.
    """
    response = raw_metadata(host, port, [], timeout=timeout, client_id="local-cluster")
    return {broker.node_id for broker in response.brokers}


class LocalCluster(ZooKeeperStateReads):
    """ZooKeeper + ``spec.brokers`` brokers of one ``kind`` (ids 1..N) on loopback, in ``run_dir``.

    ``ports`` and ``wiring`` (both per broker id) let a network mechanism put proxies in front
    of the nodes before they run; without them every broker dials its peers directly.

    Without a ``run_dir`` a temporary one is created and removed by :meth:`stop`; a given one
    is kept so the logs can be read after a failure. :meth:`stop` always stops everything it
    started, brokers before ZooKeeper (a broker whose ZooKeeper vanished first would only retry).
    """

    def __init__(
        self,
        spec: ClusterSpec | None = None,
        run_dir: Path | str | None = None,
        *,
        kind: BrokerKind = REFERENCE,
        zookeeper_port: int | None = None,
        ports: Mapping[int, BrokerPorts] | None = None,
        wiring: Mapping[int, BrokerWiring] | None = None,
    ) -> None:
        self.spec = spec or ClusterSpec()
        self.kind = kind
        if self.spec.controllers and not kind.controller_quorum:
            raise ValueError(f"dedicated controllers are for a KRaft kind; {kind.name!r} has "
                             "no controller quorum")
        for what, given in (("ports", ports), ("wiring", wiring)):
            if given is not None and sorted(given) != self.spec.node_ids:
                raise ValueError(f"{what} must name nodes {self.spec.node_ids}, "
                                 f"got {sorted(given)}")
        self._zookeeper_port = zookeeper_port
        self._ports = dict(ports) if ports is not None else None
        self._wiring = dict(wiring) if wiring is not None else None
        self._given_run_dir = Path(run_dir) if run_dir is not None else None
        self._run_dir: Path | None = None
        self.zookeeper: ZooKeeperServer | None = None
        self.brokers: dict[int, BrokerNodeProcess] = {}
        self.controllers: dict[int, BrokerNodeProcess] = {}  # dedicated KRaft controllers
        self._paused: set[int] = set()
        self.disks: dict[int, BrokerDisk] = {}  # by broker id, when spec.disk is not none
        self._state: ZooKeeperState | None = None
        self._admin_state: AdminState | None = None
        self._kraft_state: KraftState | None = None
        self._controller_ports: dict[int, int] = {}  # a KRaft quorum's controller listeners
        self._started = False

    # --- lifecycle -------------------------------------------------------------------------

    @property
    def run_dir(self) -> Path:
        if self._run_dir is None:
            raise RuntimeError("the cluster has not been started")
        return self._run_dir

    @property
    def bootstrap(self) -> str:
        """``host:port,...`` of every broker, for ``bootstrap.servers``."""
        return ",".join(broker.bootstrap for broker in self.brokers.values())

    def start(self) -> Self:
        """ZooKeeper, then every broker at once; returns when each broker's Metadata lists all.

        The brokers start in parallel because none can finish alone: until a controller is
        elected and has sent UpdateMetadata, a broker knows no cluster to describe.
        """
        if self._started:
            raise RuntimeError("the cluster is already started")
        if self._given_run_dir is not None:
            self._given_run_dir.mkdir(parents=True, exist_ok=True)
            self._run_dir = self._given_run_dir
        else:
            self._run_dir = Path(tempfile.mkdtemp(prefix="local-cluster-"))
        self._started = True
        try:
            if self.kind.needs_zookeeper:
                self.zookeeper = self._new_zookeeper(self._run_dir / "zookeeper",
                                                     self._zookeeper_port)
                self.zookeeper.start()
            wiring = self._wiring if self._wiring is not None else self._direct_wiring()
            # A node's own controller listener (it reaches itself there), to ask the quorum.
            self._controller_ports = {b: w.ports.controller[b] for b, w in wiring.items()
                                      if w.ports.controller}
            for node_id in self.spec.node_ids:
                mine = wiring[node_id]
                nodes = self.brokers if node_id in self.spec.broker_ids else self.controllers
                nodes[node_id] = self._new_broker(
                    node_id, self._run_dir / self.spec.node_name(node_id), mine.ports.client,
                    self.spec.server_properties(node_id, mine.zookeeper_connect,
                                                self.kind.wiring_properties(mine)))
            self._mount_disks()
            self._run_on_brokers(lambda broker: broker.start(), self.spec.node_ids)
            wait_until_whole(self, self.spec.startup_timeout, "after the start")
        except BaseException:
            self.stop()
            raise
        return self

    def _direct_wiring(self) -> dict[int, BrokerWiring]:
        """Every broker dialling its peers at their own addresses."""
        hosts = {b: self._broker_host(b) for b in self.spec.node_ids}
        ports = (self._ports if self._ports is not None
                 else allocate_ports(self.kind, self.spec.broker_ids,
                                     controller_ids=self.spec.controller_ids))
        return direct_wiring(ports, hosts,
                             self.zookeeper.connect_string if self.zookeeper is not None else "")

    def _broker_host(self, broker_id: int) -> str:
        """The address a broker listens on; a backend with addresses per node overrides it."""
        return LOOPBACK

    def _new_zookeeper(self, run_dir: Path, port: int | None) -> ZooKeeperServer:
        """The ZooKeeper node; a backend that runs nodes elsewhere (a namespace) overrides it."""
        return ZooKeeperServer(run_dir, port=port, startup_timeout=self.spec.startup_timeout)

    def _new_broker(self, broker_id: int, run_dir: Path, port: int,
                    properties: Mapping[str, str | int]) -> BrokerNodeProcess:
        return self.kind.new_broker(run_dir, port=port, properties=properties,
                                    startup_timeout=self.spec.startup_timeout,
                                    stop_timeout=self.spec.broker_stop_timeout)

    def _mount_disks(self) -> None:
        """Each broker's log dir (``broker-<id>/data``) on a disk of its own, before it runs."""
        if self.spec.disk is DiskLayer.NONE:
            return
        for broker_id in self.spec.broker_ids:
            disk = BrokerDisk(self.run_dir / f"broker-{broker_id}" / "data", self.spec.disk,
                              self.spec.disk_size_mb)
            self.disks[broker_id] = disk
            disk.mount()

    def disk(self, broker_id: int) -> BrokerDisk:
        """Broker ``broker_id``'s disk; a usage error when the cluster runs without disks."""
        if broker_id not in self.disks:
            raise KeyError(f"broker {broker_id} has no disk of the harness's (start the "
                           f"cluster with a disk layer, --disk limited or faulty)")
        return self.disks[broker_id]

    def stop(self) -> None:
        """Stop every broker (in parallel, SIGTERM then SIGKILL), then the dedicated
        controllers, then ZooKeeper, then unmount the brokers' disks. Never raises for a
        process that already died; safe to call twice."""
        try:
            # Brokers first: a broker's controlled shutdown asks the active controller to
            # move its leaders away, and would wait out its stop timeout with none left.
            try:
                self._run_on_brokers(lambda broker: broker.stop(), list(self.brokers))
            finally:
                self._run_on_brokers(lambda node: node.stop(), list(self.controllers))
        finally:
            self._started = False
            self._paused.clear()
            self._close_reader()
            self._admin_state = None
            self._kraft_state = None
            if self.zookeeper is not None:
                self.zookeeper.stop()
                self.zookeeper = None
            disks, self.disks = list(self.disks.values()), {}
            for disk in disks:  # before the run dir may be removed: never rmtree a mount
                disk.unmount()
            if self._given_run_dir is None and self._run_dir is not None:
                shutil.rmtree(self._run_dir, ignore_errors=True)
                self._run_dir = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _run_on_brokers(self, action: Callable[[BrokerNodeProcess], object],
                        broker_ids: list[int]) -> None:
        """Apply ``action`` to the brokers concurrently; every one finishes, and the error
        that came first is raised after all have. First in time, not in broker order: a broker
        that cannot start (a bad setting) fails as soon as it reads its configuration, while a
        peer fails, if at all, only when its wait runs out — on a loaded machine, or for want
        of the broker that failed — and that later error would hide the cause."""
        if not broker_ids:
            return
        with ThreadPoolExecutor(max_workers=len(broker_ids)) as pool:
            futures = [pool.submit(action, self.broker(b)) for b in broker_ids]
            errors = [error for future in as_completed(futures)
                      if (error := future.exception()) is not None]
        if errors:
            raise errors[0]

    # --- process faults --------------------------------------------------------------------

    def broker(self, broker_id: int) -> BrokerNodeProcess:
        """The process of node ``broker_id``: a broker, or a dedicated controller (process
        faults take either by its node id)."""
        node = self.brokers.get(broker_id) or self.controllers.get(broker_id)
        if node is None:
            raise KeyError(f"no node {broker_id}; nodes are "
                           f"{sorted([*self.brokers, *self.controllers])}")
        return node

    def kill(self, broker_id: int) -> int | None:
        """SIGKILL: a crash. Its ZooKeeper session lives on until the session timeout."""
        self._paused.discard(broker_id)
        return self.broker(broker_id).kill()

    def stop_broker(self, broker_id: int) -> int | None:
        """SIGTERM: a graceful stop (controlled shutdown if the broker does it); exit code."""
        self._paused.discard(broker_id)
        return self.broker(broker_id).stop()

    def start_broker(self, broker_id: int, *, wait_for_deregistration: bool = True) -> None:
        """Start a stopped or killed broker again, same port and data directory.

        A killed broker's registration outlives it until ZooKeeper expires its session, and a
        broker refuses to start while its id is registered by another session — so by default
        this first waits for ``/brokers/ids/[id]`` to go. Returns once the broker is registered
        again and its own Metadata lists it.
        """
        broker = self.broker(broker_id)
        if broker.is_running():
            raise RuntimeError(f"broker {broker_id} is already running (pid {broker.pid})")
        if wait_for_deregistration and self.zookeeper is not None:  # a znode outlives a crash
            timeout = self.spec.zookeeper_session_timeout_ms / 1000 + 10
            self.wait_for(lambda: self.broker_registration(broker_id) is None, timeout,
                          f"the old registration of broker {broker_id} to expire")
        broker.start()
        if broker_id in self.controllers:  # no registration: it serves once a leader is known
            self.wait_for(self._quorum_has_leader, self.spec.startup_timeout,
                          "the quorum to have a leader")
            return
        self.wait_for(lambda: self.broker_registration(broker_id) is not None,
                      self.spec.startup_timeout, f"broker {broker_id} to register in ZooKeeper")
        self.wait_for(lambda: broker_id in self.broker_metadata(broker_id),
                      self.spec.startup_timeout, f"broker {broker_id}'s Metadata to list itself")

    def _quorum_has_leader(self) -> bool:
        try:
            return self.controller_id() is not None
        except ConnectionError:
            return False

    def pause(self, broker_id: int) -> None:
        """SIGSTOP: the broker hangs with its connections open (its session expires later)."""
        self.broker(broker_id).pause()
        self._paused.add(broker_id)

    def resume(self, broker_id: int) -> None:
        """SIGCONT after :meth:`pause`."""
        self.broker(broker_id).resume()
        self._paused.discard(broker_id)

    @property
    def paused(self) -> frozenset[int]:
        return frozenset(self._paused)

    def running_broker_ids(self) -> list[int]:
        """Brokers whose process is alive (paused ones included)."""
        return [b for b, broker in self.brokers.items() if broker.is_running()]

    # --- reading the cluster ---------------------------------------------------------------

    @property
    def state(self) -> ZooKeeperState:
        """The cluster's state as its ZooKeeper records it (controller, ISR, registrations)."""
        if self.zookeeper is None:
            raise RuntimeError("the cluster has not been started" if self.kind.needs_zookeeper
                               else f"the {self.kind.name!r} kind runs without ZooKeeper")
        if self._state is None or self._state.hosts != self.zookeeper.connect_string:
            if self._state is not None:  # its kazoo client's threads would outlive it
                self._state.close()
            self._state = ZooKeeperState(self.zookeeper.connect_string)
        return self._state

    @property
    def reads(self) -> ClusterState:
        """Where the cluster-state questions are answered: ZooKeeper; for a KRaft quorum the
        nodes' own listeners (:class:`~harness.cluster.kraft_state.KraftState`); for another
        kind without ZooKeeper the Admin API on the brokers (which follows the addresses they
        advertise, so a cut of the clients' links hides the state too)."""
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

    def _running_addresses(self) -> dict[int, tuple[str, int]]:
        """The own listeners of the brokers whose process runs and is not paused, by id."""
        return {broker_id: (broker.host, broker.port)
                for broker_id, broker in self.brokers.items()
                if broker.port is not None and broker.is_running()
                and broker_id not in self._paused}

    def _running_controllers(self) -> list[tuple[str, int]]:
        """The own controller listeners of the quorum's nodes that run and are not paused."""
        return [(self.broker(b).host, port) for b, port in self._controller_ports.items()
                if self.broker(b).is_running() and b not in self._paused]

    def lists_brokers(self, broker_id: int, expected: set[int]) -> bool:
        """Whether ``broker_id``'s Metadata lists every broker in ``expected``."""
        return self.broker_metadata(broker_id) >= expected

    def broker_metadata(self, broker_id: int) -> set[int]:
        """The broker ids ``broker_id`` lists in its own Metadata answer."""
        broker = self.broker(broker_id)
        assert broker.port is not None
        return metadata_broker_ids(broker.host, broker.port)

    def wait_for(self, predicate: Callable[[], T], timeout: float, what: str, *,
                 interval: float = POLL_INTERVAL_S) -> T:
        """:func:`wait_for`, whose timeout message also says where the logs are."""
        context = f"logs under {self._run_dir}" if self._run_dir is not None else ""
        return wait_for(predicate, timeout, what, interval=interval, context=context)

    def log_paths(self) -> list[Path]:
        """Every node's log, ZooKeeper first — what to read when a test fails."""
        zookeeper = ([self.run_dir / "zookeeper" / f"{ZooKeeperServer.name}.log"]
                     if self.kind.needs_zookeeper else [])
        return zookeeper + [
            self.run_dir / self.spec.node_name(node_id) / f"{self.kind.log_name}.log"
            for node_id in self.spec.node_ids
        ]

