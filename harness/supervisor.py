"""The process that owns a running cluster so separate shells can fault it.

``kafka-harness up`` starts this module as a detached process (``python -m
harness.supervisor RUN_DIR ...``, its own session) or runs it in the terminal with
``--foreground``. It owns the cluster and its faults — with ``--network proxy`` (the default) a
:class:`~harness.cluster.proxied.ProxiedCluster` and its
:class:`~harness.cluster.proxy_faults.NetworkFaults`, with ``--network kernel`` a
:class:`~harness.cluster.netns_cluster.NetnsCluster` (nodes in network namespaces) and its
:class:`~harness.cluster.netns_cluster.KernelFaults` (iptables); with ``--backend docker`` a
:class:`~harness.cluster.docker_backend.DockerCluster` (containers) and its
:class:`~harness.cluster.docker_faults.IptablesPartitions` — and is the only process that
touches them: every other command is a client of its control socket
(:mod:`harness.cluster.control`). Keeping one owner is what makes ``down`` (and SIGTERM,
SIGINT) leave nothing behind — the owner knows every process, proxy, namespace, rule and
container it started, and removes them in order (containers, networks and volumes by their
run label).

Files in the run directory, next to the cluster's own (``zookeeper/``, ``broker-N/``,
``toxiproxy/``; on docker, each container's ``<node>.log``):

* ``control.sock`` — the control socket (``{"cmd": "status"}`` in, ``{"ok": true, ...}`` out);
  it exists exactly while the supervisor serves.
* ``state.json`` — the last known state (phase, nodes, pids, ports, bootstrap, proxies, active
  faults), rewritten atomically after every command and every few seconds; it is kept after
  ``down`` (phase ``stopped``) for post-mortems.
* ``supervisor.log`` — the detached supervisor's output.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from harness import supervisor_registry
from harness.cluster.control import ControlServer, socket_path
from harness.cluster.factory import (
    Backend,
    ClusterOptions,
    Faults,
    Network,
    RunnableCluster,
    TargetName,
    build,
)
from harness.cluster.kinds import Capability
from harness.cluster.local import ClusterSpec
from harness.cluster.netns_cluster import NetnsCluster
from harness.cluster.proxied import ProxiedCluster
from harness.cluster.targets import Target, start
from harness.disk.broker_disk import DiskFault, DiskLayer
from harness.nemesis import disk as cluster_disks
from harness.nemesis import process as process_faults

logger = logging.getLogger("harness.supervisor")

STATE_NAME = "state.json"
LOG_NAME = "supervisor.log"
_STATE_REFRESH_S = 5.0
_ZOOKEEPER_QUERY_TIMEOUT_S = 2.0

PROCESS_COMMANDS = tuple(process_faults.ACTIONS)
SHAPES = ("isolate", "halves", "ring", "bridge", "grudge")


class UsageError(ValueError):
    """A request naming something that does not exist (node, link, shape) or malformed."""


class _Interrupted(BaseException):
    """SIGTERM or SIGINT while the cluster was still starting."""


def state_path(run_dir: Path) -> Path:
    return run_dir / STATE_NAME


def process_state(pid: int | None) -> str:
    """``running``, ``paused`` (SIGSTOPped) or ``down`` (gone or a zombie), from /proc."""
    if pid is None:
        return "down"
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return "down"
    state = stat.rsplit(")", 1)[1].split()[0]
    return {"T": "paused", "t": "paused", "Z": "down", "X": "down"}.get(state, "running")


def read_state(run_dir: Path) -> dict[str, Any] | None:
    try:
        return json.loads(state_path(run_dir).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _write_json_atomically(path: Path, document: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


class Supervisor:
    """One cluster, its faults, and the state file describing them."""

    def __init__(self, run_dir: Path, spec: ClusterSpec, toxiproxy_url: str | None = None,
                 *, target: str = TargetName.REFERENCE, bootstrap: str | None = None,
                 network: str = Network.PROXY, backend: str = Backend.LOCAL) -> None:
        self.options = ClusterOptions(TargetName(target), spec.brokers, Network(network),
                                      Backend(backend), bootstrap, spec.properties, toxiproxy_url)
        self.options.check()
        self.run_dir = run_dir
        self.spec = spec
        self.target_kind = self.options.target.value
        self.network = self.options.network.value
        self.backend_kind = self.options.backend.value
        # A peer target (tansu, librdkafka-mock, external) has a bootstrap and nothing to fault.
        self.peer: Target | None = None
        self.proxied: ProxiedCluster | None = None
        self.kernel: NetnsCluster | None = None
        self.docker: Any = None  # a DockerCluster; imported only when asked for
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
            else:
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
    def local(self) -> Any:
        """The nodes and ZooKeeper of the reference cluster: a LocalCluster, or the
        DockerCluster itself (it offers the same methods and node handles)."""
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
            "spec": {"brokers": self.spec.brokers,
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
            _write_json_atomically(state_path(self.run_dir), document)

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
        zk_facts = self._zookeeper_facts()
        nodes = (self._container_nodes(zk_facts) if self.docker is not None
                 else self._process_nodes(zk_facts))
        try:
            faults = self._faults.active()
        except Exception as exc:  # noqa: BLE001 - a dead Toxiproxy is itself what status shows
            faults = {"error": f"cannot read the faults: {exc}"}
        document.update({
            "nodes": nodes,
            "controller": zk_facts.get("controller"),
            "controller_epoch": zk_facts.get("controller_epoch"),
            "partitions": zk_facts.get("partitions", {}),
            "faults": faults,
            "logs": [str(self.run_dir / LOG_NAME), *map(str, self.backend.log_paths())],
            **self._network_facts(),
        })
        document["degraded"] = _degradations(document, zk_facts)
        return document

    def _process_nodes(self, zk_facts: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """Local nodes: pid, port and state of each process."""
        local = self.local
        nodes: dict[str, dict[str, Any]] = {}
        zookeeper = local.zookeeper
        if zookeeper is not None:
            nodes["zk"] = {"pid": zookeeper.pid, "port": zookeeper.port,
                           "status": process_state(zookeeper.pid),
                           "log": str(zookeeper.run_dir / f"{zookeeper.name}.log")}
        for broker_id, broker in local.brokers.items():
            node = f"broker-{broker_id}"
            registered = zk_facts.get("registered")
            nodes[node] = {
                "pid": broker.pid,
                "port": broker.port,
                "client_address": self._client_address(node, broker.bootstrap),
                "status": process_state(broker.pid),
                "registered": None if registered is None else broker_id in registered,
                "log": str(broker.run_dir / f"{broker.name}.log"),
            }
            disk = cluster_disks.disks_of(local).get(broker_id)
            if disk is not None and disk.mounted:  # layer, size, free, ballast, error rate
                nodes[node]["disk"] = asdict(disk.state())
        return nodes

    def _container_nodes(self, zk_facts: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """Docker nodes: the container (not a pid of this host's process tree), its state as
        the engine reports it, and its address on the run's network."""
        docker = self.docker
        handles = {"zk": docker.zookeeper,
                   **{f"broker-{b}": handle for b, handle in docker.brokers.items()}}
        registered = zk_facts.get("registered")
        nodes: dict[str, dict[str, Any]] = {}
        for node, handle in handles.items():
            if handle is None:
                continue
            status = handle.status()
            nodes[node] = {"container": handle.container_id, "name": handle.container.name,
                           "pid": None, "port": handle.port, "address": handle.bootstrap,
                           "status": status, "log": str(handle.log_path)}
            if node != "zk":
                broker_id = int(node.removeprefix("broker-"))
                nodes[node]["client_address"] = self._client_address(node, handle.bootstrap)
                nodes[node]["registered"] = (None if registered is None
                                             else broker_id in registered)
        return nodes

    def _client_address(self, node: str, direct: str) -> str:
        cluster = self.proxied or self.docker
        if cluster is None:
            return direct  # kernel: clients reach the broker in its namespace
        host, port, _ = cluster.links[f"client->{node}"]
        return f"{host}:{port}"

    def _network_facts(self) -> dict[str, Any]:
        """How clients reach the cluster and what the network mechanism is made of."""
        if self.kernel is not None:
            net = self.kernel.net
            return {"bootstrap": self.kernel.bootstrap, "direct_bootstrap": self.kernel.bootstrap,
                    "toxiproxy_url": None, "toxiproxy_pid": None, "toxiproxy_server": None,
                    "proxies": {},
                    "namespaces": self.kernel.namespaces(), "addresses": self.kernel.addresses(),
                    "hub": net.hub if net else None, "bridge": net.bridge if net else None,
                    "host_link": net.host_link if net else None,
                    "subnet": str(net.subnet) if net else None}
        if self.docker is not None:
            docker = self.docker
            return {"bootstrap": docker.bootstrap, "direct_bootstrap": docker.direct_bootstrap,
                    "toxiproxy_url": docker.toxiproxy_url, "toxiproxy_pid": None,
                    "toxiproxy_server": (f"real ({docker.toxiproxy_image})"
                                         if docker.toxiproxy_image else "built-in"),
                    "proxies": {name: {"listen": f"{host}:{port}", "upstream": upstream}
                                for name, (host, port, upstream) in docker.links.items()},
                    "run_label": docker.label_selector, "docker_network": docker.network_name,
                    "zookeeper_connect": docker.zookeeper_connect,
                    "subnet": docker.subnet}
        assert self.proxied is not None
        return {
            "bootstrap": self.proxied.bootstrap,
            "direct_bootstrap": self.proxied.direct_bootstrap,
            "toxiproxy_url": self.proxied.toxiproxy_url,
            "toxiproxy_pid": self.proxied.server_pid,
            "toxiproxy_server": self.proxied.toxiproxy_server.describe(),
            "proxies": {name: {"listen": f"{host}:{port}", "upstream": upstream}
                        for name, (host, port, upstream) in self.proxied.links.items()},
        }

    def _peer_state(self, document: dict[str, Any]) -> dict[str, Any]:
        peer = self.peer
        document.update({
            "nodes": {}, "controller": None, "bootstrap": peer.bootstrap if peer else None,
            "toxiproxy_url": None, "proxies": {}, "faults": {"partition": [], "toxics": {}},
            "capabilities": sorted(peer.capabilities) if peer else [], "degraded": []})
        return document

    def _zookeeper_facts(self) -> dict[str, Any]:
        """Registered broker ids and the controller, or nothing if ZooKeeper does not answer in
        time (paused, killed): status must answer while ZooKeeper is the fault."""
        facts: dict[str, Any] = {}
        local = self.local

        def ask() -> None:
            facts["registered"] = local.registered_broker_ids()
            facts["partitions"] = {
                name: {"leader": state["leader"], "isr": state["isr"],
                       "leader_epoch": state["leader_epoch"]}
                for name, state in local.state.partition_states().items()}
            facts["controller_epoch"] = local.controller_epoch()
            facts["controller"] = local.controller_id()

        worker = threading.Thread(target=ask, name="status-zk", daemon=True)
        worker.start()
        worker.join(_ZOOKEEPER_QUERY_TIMEOUT_S)
        if "controller" not in facts:
            return {"zookeeper_unreachable": True}
        return facts

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

    def _apply(self, command: Any, request: dict[str, Any]) -> dict[str, Any]:
        if command == "partition":
            return {"cut": [list(pair) for pair in self._partition(request)]}
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
            return process_faults.apply(self.local, command, _string(request, "node"))
        if command == "disk":
            return {"done": self._disk(DiskFault(_string(request, "fault")),
                                       _string(request, "node"), request.get("rate"))}
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


def _degradations(document: dict[str, Any], zk_facts: dict[str, Any]) -> list[str]:
    """What a user should know is not healthy, one line each."""
    found = []
    for node, facts in document["nodes"].items():
        if facts["status"] != "running":
            found.append(f"{node} is {facts['status']}")
        elif facts.get("registered") is False:
            found.append(f"{node} is not registered in ZooKeeper")
    if zk_facts.get("zookeeper_unreachable"):
        found.append("ZooKeeper did not answer the harness")
    elif document["controller"] is None:
        found.append("no controller")
    faults = document["faults"]
    if "error" in faults:
        found.append(faults["error"])
    else:
        if faults["partition"]:
            found.append(f"partition: {len(faults['partition'])} directed node pairs cut")
        for link, names in faults["toxics"].items():
            found.append(f"toxics on {link}: {', '.join(names)}")
    return found


# --- running it --------------------------------------------------------------------------------


def run(run_dir: Path, spec: ClusterSpec, *, toxiproxy_url: str | None = None,
        on_ready: Callable[[dict[str, Any]], None] | None = None, target: str = "reference",
        bootstrap: str | None = None, network: str = "proxy", backend: str = "local") -> int:
    """Start the cluster, serve the control socket until ``down``/SIGTERM/SIGINT, stop it all.

    Must run in the main thread (it owns the signal handlers). Returns 0 after a clean stop,
    3 when the cluster could not start, 130 when interrupted while starting.
    """
    run_dir = run_dir.resolve()
    supervisor = Supervisor(run_dir, spec, toxiproxy_url, target=target, bootstrap=bootstrap,
                            network=network, backend=backend)
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


def launch_detached(run_dir: Path, spec: ClusterSpec, toxiproxy_url: str | None = None, *,
                    target: str = "reference", bootstrap: str | None = None,
                    network: str = "proxy", backend: str = "local") -> subprocess.Popen[bytes]:
    """Start the supervisor as a detached process (own session, so the terminal's Ctrl-C and
    its closing do not reach it), its output in ``RUN_DIR/supervisor.log``. The caller watches
    ``state.json`` for phase ``ready`` or ``failed``."""
    run_dir.mkdir(parents=True, exist_ok=True)
    for stale in (socket_path(run_dir), state_path(run_dir)):
        stale.unlink(missing_ok=True)
    command = [sys.executable, "-m", "harness.supervisor", str(run_dir),
               "--brokers", str(spec.brokers),
               "--session-timeout-ms", str(spec.zookeeper_session_timeout_ms)]
    if toxiproxy_url:
        command += ["--toxiproxy-url", toxiproxy_url]
    command += ["--target", target, "--network", network, "--backend", backend]
    if spec.disk is not DiskLayer.NONE:
        command += ["--disk", spec.disk.value]
    if bootstrap:
        command += ["--bootstrap-server", bootstrap]
    with open(run_dir / LOG_NAME, "ab") as log:
        return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                cwd=run_dir)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.supervisor",
        description="Own a local cluster and serve RUN_DIR/control.sock until down.")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--toxiproxy-url", default=None)
    parser.add_argument("--target", choices=[t.value for t in TargetName], default="reference")
    # Spelt as Kafka's tools spell it; --bootstrap is what `up` of the first release passed.
    parser.add_argument("--bootstrap-server", "--bootstrap", dest="bootstrap", default=None)
    parser.add_argument("--network", choices=[n.value for n in Network], default="proxy")
    parser.add_argument("--backend", choices=[b.value for b in Backend], default="local")
    parser.add_argument("--disk", choices=[d.value for d in DiskLayer], default="none")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        spec = ClusterSpec(brokers=args.brokers,
                           zookeeper_session_timeout_ms=args.session_timeout_ms,
                           disk=DiskLayer(args.disk))
        ClusterOptions(TargetName(args.target), args.brokers, Network(args.network),
                       Backend(args.backend), args.bootstrap).check()
    except ValueError as exc:
        logger.error("%s", exc)
        return 2
    return run(args.run_dir, spec, toxiproxy_url=args.toxiproxy_url, target=args.target,
               bootstrap=args.bootstrap, network=args.network, backend=args.backend)


if __name__ == "__main__":
    sys.exit(main())
