"""The process that owns a running cluster so separate shells can fault it.

``kafka-harness up`` starts this module as a detached process (``python -m
harness.supervisor RUN_DIR ...``, its own session) or runs it in the terminal with
``--foreground``. It owns the cluster and its faults — with ``--network proxy`` (the default) a
:class:`~harness.cluster.proxied.ProxiedCluster` and its
:class:`~harness.cluster.proxy_faults.NetworkFaults`, with ``--network kernel`` a
:class:`~harness.cluster.netns_cluster.NetnsCluster` (nodes in network namespaces) and its
:class:`~harness.cluster.netns_cluster.KernelFaults` (iptables); with ``--backend docker`` a
:class:`~harness.cluster.docker.backend.DockerCluster` (containers) and its
:class:`~harness.cluster.docker.faults.IptablesPartitions` — and is the only process that
touches them: every other command is a client of its control socket
(:mod:`harness.supervisor.control`). Keeping one owner is what makes ``down`` (and SIGTERM,
SIGINT) leave nothing behind — the owner knows every process, proxy, namespace, rule and
container it started, and removes them in order (containers, networks and volumes by their
run label).

Files in the run directory, next to the cluster's own (``zookeeper/``, ``broker-N/``,
``toxiproxy/``; on docker, each container's ``<node>.log``): ``control.sock``
(:mod:`harness.supervisor.control`, it exists exactly while the supervisor serves),
``state.json`` and ``supervisor.log`` (:mod:`harness.supervisor.files`). What the state shows of
each node and link is gathered in :mod:`harness.supervisor.status`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.cluster.docker.backend import DockerCluster
from harness.cluster.factory import Faults, RunnableCluster, build
from harness.cluster.kinds import Capability
from harness.cluster.local import LocalCluster
from harness.cluster.netns_cluster import NetnsCluster
from harness.cluster.nodes import ClusterNodes
from harness.cluster.options import ClusterOptions
from harness.cluster.proxied import ProxiedCluster
from harness.cluster.spec import ClusterSpec
from harness.cluster.targets import Target, start
from harness.disk.broker_disk import DiskFault
from harness.nemesis import disk as cluster_disks
from harness.nemesis import process as process_faults
from harness.nemesis import roles
from harness.supervisor import registry as supervisor_registry
from harness.supervisor import status
from harness.supervisor.control import ControlServer, socket_path
from harness.supervisor.files import LOG_NAME, state_path, write_json_atomically
from harness.supervisor.launch import Launch

logger = logging.getLogger("harness.supervisor")

_STATE_REFRESH_S = 5.0

PROCESS_COMMANDS = tuple(process_faults.ACTIONS)
SHAPES = ("isolate", "halves", "ring", "bridge", "grudge")


class UsageError(ValueError):
    """A request naming something that does not exist (node, link, shape) or malformed."""


class _Interrupted(BaseException):
    """SIGTERM or SIGINT while the cluster was still starting."""


class Supervisor:
    """One cluster, its faults, and the state file describing them."""

    def __init__(self, run_dir: Path, spec: ClusterSpec, launch: Launch) -> None:
        self.options = ClusterOptions(launch.target, spec.brokers, launch.network,
                                      launch.backend, launch.bootstrap, spec.properties,
                                      launch.toxiproxy_url, controllers=spec.controllers)
        self.options.check()
        self.run_dir = run_dir
        self.spec = spec
        self.target_kind = self.options.target.value
        self.network = self.options.network.value
        self.backend_kind = self.options.backend.value
        # A peer target (tansu, kfake, librdkafka-mock, external) has a bootstrap and nothing
        # to fault.
        self.peer: Target | None = None
        self.proxied: ProxiedCluster | None = None
        self.kernel: NetnsCluster | None = None
        self.docker: DockerCluster | None = None
        self.faults: Faults | None = None
        self._cluster: RunnableCluster | None = None
        self.version = ""  # of the brokers, once started
        if self.options.faultable:
            built = build(self.options, run_dir, spec=spec)
            self._cluster, self.faults = built.cluster, built.faults
            self._kind = built.kind
            if isinstance(built.cluster, ProxiedCluster) and built.mechanism == "proxy":
                self.proxied = built.cluster
            elif isinstance(built.cluster, NetnsCluster):
                self.kernel = built.cluster
            elif isinstance(built.cluster, DockerCluster):
                self.docker = built.cluster
        self.stopping = threading.Event()
        self._lock = threading.Lock()  # one fault at a time; status does not wait for it
        self._state_lock = threading.Lock()
        self._phase = "starting"
        self._started_at = time.time()
        self._error: str | None = None

    # --- lifecycle -------------------------------------------------------------------------

    @property
    def phase(self) -> str:
        """``starting``, ``ready``, ``failed``, ``stopping`` or ``stopped``."""
        return self._phase

    @property
    def backend(self) -> RunnableCluster | None:
        """The cluster the harness runs (ProxiedCluster, NetnsCluster or DockerCluster); None
        for a peer target."""
        return self._cluster

    @property
    def local(self) -> ClusterNodes:
        """The nodes and ZooKeeper of the cluster: a LocalCluster, or the DockerCluster itself
        (it offers the same methods and node handles)."""
        assert self.backend is not None
        return self.backend.cluster

    def start(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if self.backend is None:
            self._set_phase("starting", f"starting the {self.target_kind} target")
        elif self.kernel is not None:
            self._set_phase("starting", f"starting ZooKeeper and {self.spec.brokers} brokers "
                                        "in network namespaces")
        elif self.docker is not None:
            self._set_phase("starting", "building the image if the sources changed, then "
                                        f"starting ZooKeeper, {self.spec.brokers} brokers and "
                                        "Toxiproxy in containers")
        else:
            self._set_phase("starting", f"starting Toxiproxy, ZooKeeper and {self.spec.brokers} "
                                        "brokers behind proxies")
        try:
            if self.backend is None:
                self.peer = start(self.options, self.run_dir / "target")
                self.version = self.peer.version
            else:
                self.backend.start()
                self.version = self._kind.version()
        except BaseException as exc:
            self._error = f"{type(exc).__name__}: {exc}"
            self._set_phase("failed", "the cluster did not start")
            raise
        self._set_phase("ready", "ready")

    def stop(self) -> None:
        """Wait for a fault in progress, then stop everything; never raises."""
        self._set_phase("stopping", "stopping the brokers, ZooKeeper and the proxies")
        with self._lock:
            try:
                if self.backend is not None:
                    self.backend.stop()
                elif self.peer is not None:
                    self.peer.close()
            except Exception:  # noqa: BLE001 - the stop must finish; the log says what failed
                logger.exception("stopping the cluster failed")
        self._set_phase("stopped", "stopped")

    def _set_phase(self, phase: str, step: str) -> None:
        self._phase = phase
        logger.info("%s: %s", phase, step)
        document = self.state() if phase == "ready" else self._bare_state()
        document["step"] = step
        self._write_state(document)

    def _bare_state(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "phase": self._phase,
            "run_dir": str(self.run_dir),
            "target": self.target_kind,
            "version": self.version,
            "network": self.network if self.backend is not None else None,
            "backend": self.backend_kind,
            "supervisor_pid": os.getpid(),
            "started_at": self._started_at,
            "spec": {"brokers": self.spec.brokers, "controllers": self.spec.controllers,
                     "zookeeper_session_timeout_ms": self.spec.zookeeper_session_timeout_ms},
            "logs": [str(self.run_dir / LOG_NAME)],
        }
        if self._error is not None:
            document["error"] = self._error
        if self._phase == "stopped":
            document["stopped_at"] = time.time()
        return document

    def _write_state(self, document: dict[str, Any]) -> None:
        with self._state_lock:
            write_json_atomically(state_path(self.run_dir), document)

    def refresh_state(self) -> dict[str, Any]:
        document = self.state()
        if self._phase == "ready":
            self._write_state(document)
        return document

    # --- what is running -------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """Nodes with pids, ports and status, controller, bootstrap, proxies, active faults,
        and what is degraded."""
        document = self._bare_state()
        if self._phase not in ("ready", "stopping"):
            return document
        if self.backend is None:
            return self._peer_state(document)
        local = self.local
        assert isinstance(local, LocalCluster | DockerCluster)  # what the backends' nodes are
        zk_facts = status.metadata_facts(local)
        proxied = self.proxied or self.docker

        def client_address(node: str, direct: str) -> str:
            return status.client_address(proxied, node, direct)

        nodes = (status.container_nodes(local, zk_facts, client_address)
                 if isinstance(local, DockerCluster)
                 else status.process_nodes(local, zk_facts, client_address))
        try:
            faults = self._faults.active()
        except Exception as exc:  # noqa: BLE001 - a dead Toxiproxy is itself what status shows
            faults = {"error": f"cannot read the faults: {exc}"}
        document.update({
            "nodes": nodes,
            "controller": zk_facts.get("controller"),
            "controller_epoch": zk_facts.get("controller_epoch"),
            "partitions": zk_facts.get("partitions", {}),
            **({"quorum": zk_facts["quorum"]} if "quorum" in zk_facts else {}),
            "faults": faults,
            "logs": [str(self.run_dir / LOG_NAME), *map(str, self.backend.log_paths())],
            **status.network_facts(self.kernel, self.docker, self.proxied),
        })
        document["degraded"] = status.degradations(document, zk_facts)
        return document

    def _peer_state(self, document: dict[str, Any]) -> dict[str, Any]:
        peer = self.peer
        document.update({
            "nodes": {}, "controller": None, "bootstrap": peer.bootstrap if peer else None,
            "toxiproxy_url": None, "proxies": {}, "faults": {"partition": [], "toxics": {}},
            "capabilities": sorted(peer.capabilities) if peer else [], "degraded": []})
        return document

    # --- requests --------------------------------------------------------------------------

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        """Answer one control request; errors become ``{"ok": false, ...}``, never raise."""
        command = request.get("cmd")
        try:
            if command == "status":
                return {"ok": True, "state": self.refresh_state()}
            if command == "down":
                self.stopping.set()
                return {"ok": True, "supervisor_pid": os.getpid()}
            if self._phase != "ready":
                return {"ok": False, "kind": "failed", "error": f"the cluster is {self._phase}"}
            if self.peer is not None:
                needed = (Capability.PROCESS_FAULTS if command in (*PROCESS_COMMANDS, "disk")
                          else Capability.FAULTS)
                return {"ok": False, "kind": "usage",
                        "error": self.peer.missing(needed) or f"{command} is not offered"}
            with self._lock:
                result = self._apply(command, request)
            self.refresh_state()
            return {"ok": True, **result}
        except (UsageError, process_faults.UnknownNode, ValueError, KeyError) as exc:
            return {"ok": False, "kind": "usage", "error": _message(exc)}
        except Exception as exc:  # noqa: BLE001 - reported to the caller, logged here
            logger.exception("%s failed", command)
            return {"ok": False, "kind": "failed", "error": f"{type(exc).__name__}: {exc}"}

    @property
    def _faults(self) -> Faults:
        """The faults of the cluster the harness runs (peer targets are answered earlier)."""
        assert self.faults is not None, "a peer target has no faults"
        return self.faults

    def _node(self, request: dict[str, Any]) -> str:
        """The node a request names: itself, or the broker holding the role it names now
        (``controller``, ``leader:TOPIC/PARTITION``, ``coordinator:GROUP``)."""
        try:
            return roles.resolve(self.local, _string(request, "node"))
        except roles.NoHolder as exc:
            raise UsageError(str(exc)) from None

    def _apply(self, command: Any, request: dict[str, Any]) -> dict[str, Any]:
        if command == "partition":
            if request.get("shape") == "isolate":
                request = {**request, "node": self._node(request)}
            return {"cut": [list(pair) for pair in self._partition(request)],
                    **({"node": request["node"]} if "node" in request else {})}
        if command == "heal":
            self._faults.heal()
            return {}
        if command == "toxic_add":
            name = self._faults.add_toxic(
                _string(request, "link"), _string(request, "type"),
                dict(request.get("attributes") or {}),
                stream=request.get("stream", "downstream"),
                toxicity=float(request.get("toxicity", 1.0)),
                name=request.get("name"))
            return {"name": name}
        if command == "toxic_remove":
            self._faults.remove_toxic(_string(request, "link"), _string(request, "name"))
            return {}
        if command in PROCESS_COMMANDS:
            node = self._node(request)
            return {**process_faults.apply(self.local, command, node), "node": node}
        if command == "disk":
            node = self._node(request)
            return {"done": self._disk(DiskFault(_string(request, "fault")), node,
                                       request.get("rate")), "node": node}
        raise UsageError(f"unknown command {command!r}")

    def _disk(self, fault: DiskFault, node: str, rate: object) -> str:
        if fault is DiskFault.HEAL:
            return cluster_disks.heal_disk(self.local, node)
        if fault is DiskFault.ERRORS:
            return cluster_disks.apply_disk_fault(
                self.local, fault, node,
                float(rate) if isinstance(rate, int | float) else cluster_disks.DISK_ERROR_RATE)
        return cluster_disks.apply_disk_fault(self.local, fault, node)

    def _partition(self, request: dict[str, Any]) -> list[tuple[str, str]]:
        shape = request.get("shape")
        if shape == "isolate":
            return self._faults.isolate(_string(request, "node"))
        if shape == "halves":
            return self._faults.halves()
        if shape == "ring":
            return self._faults.ring()
        if shape == "bridge":
            return self._faults.bridge()
        if shape == "grudge":
            grudge = request.get("grudge")
            if not isinstance(grudge, dict) or not all(
                    isinstance(v, list) and all(isinstance(n, str) for n in v)
                    for v in grudge.values()):
                raise UsageError("a grudge is a JSON object {node: [nodes it cannot hear]}")
            return self._faults.partition(grudge)
        raise UsageError(f"unknown partition shape {shape!r}; shapes are {', '.join(SHAPES)}")


def _string(request: dict[str, Any], key: str) -> str:
    value = request.get(key)
    if not isinstance(value, str) or not value:
        raise UsageError(f"the request needs {key!r} (a string)")
    return value


def _message(exc: Exception) -> str:
    return str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)


# --- running it --------------------------------------------------------------------------------


def run(run_dir: Path, spec: ClusterSpec, launch: Launch, *,
        on_ready: Callable[[dict[str, Any]], None] | None = None) -> int:
    """Start the cluster, serve the control socket until ``down``/SIGTERM/SIGINT, stop it all.

    Must run in the main thread (it owns the signal handlers). Returns 0 after a clean stop,
    3 when the cluster could not start, 130 when interrupted while starting.
    """
    run_dir = run_dir.resolve()
    supervisor = Supervisor(run_dir, spec, launch)
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}

    def interrupt_start(signum: int, _frame: object) -> None:
        for sig in previous:
            signal.signal(sig, lambda *_: supervisor.stopping.set())
        raise _Interrupted(signal.Signals(signum).name)

    for signum in previous:
        signal.signal(signum, interrupt_start)
    server: ControlServer | None = None
    card = supervisor_registry.register(run_dir)  # so `down --all` finds this run
    try:
        try:
            supervisor.start()
        except _Interrupted as exc:
            logger.info("interrupted by %s while starting; everything started was stopped", exc)
            return 130
        except Exception as exc:  # noqa: BLE001 - any start failure is "infrastructure", exit 3
            logger.error("the cluster did not start: %s", exc)
            return 3
        for signum in previous:
            signal.signal(signum, lambda *_: supervisor.stopping.set())
        server = ControlServer(socket_path(run_dir), supervisor.handle)
        threading.Thread(target=server.serve_forever, name="control-socket",
                         daemon=True).start()
        if on_ready is not None:
            on_ready(supervisor.state())
        last_refresh = time.monotonic()
        while not supervisor.stopping.wait(0.2):
            if time.monotonic() - last_refresh >= _STATE_REFRESH_S:
                with contextlib.suppress(Exception):
                    supervisor.refresh_state()
                last_refresh = time.monotonic()
        logger.info("stopping on request")
        return 0
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()
            socket_path(run_dir).unlink(missing_ok=True)
        if supervisor.phase not in ("failed", "stopped"):
            supervisor.stop()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        supervisor_registry.unregister(card)
