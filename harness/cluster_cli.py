"""What `kafka-harness up`, `status`, `down` and the fault commands do, apart from their options.

Each command is a separate process talking to the supervisor's control socket
(:mod:`harness.supervisor`), the only owner of the cluster; :mod:`harness.cli` maps options onto
the functions here. Failures are raised as :mod:`harness.cli_errors` errors, which carry their
exit code, so no function here chooses a number.

Link names (``client->broker-1``) hold a ``>``, which a shell reads as a redirection: every
message shows them through :func:`shown`, quoted so that a user can paste them back.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypedDict

from rich.console import Console
from rich.markup import escape
from rich.status import Status
from rich.table import Table

from harness.cli_errors import CommandFailed, ExitCode, InfrastructureError, UsageError
from harness.cluster.factory import Backend, Network, TargetName
from harness.cluster.registry import BROKER_KINDS
from harness.disk.broker_disk import DiskFault, DiskLayer
from harness.waiting import ClusterWaitTimeout, wait_for

if TYPE_CHECKING:
    from harness.cluster.local import ClusterSpec

_IMAGE_BUILD_BUDGET_S = 900
_DOWN_TIMEOUT_S = 180


class Launch(TypedDict):
    """What the supervisor runs, as :func:`harness.supervisor.run` takes it."""

    target: str
    bootstrap: str | None
    network: str
    backend: str


def stderr() -> Console:
    """Messages are not wrapped at 80 columns when stderr is not a terminal: a path or a link
    name stays whole for a script or a user to copy."""
    return Console(stderr=True, soft_wrap=True)


def shown(name: str) -> str:
    """A node or link name as a shell reads it back: ``'client->broker-1'``, ``broker-1``."""
    return shlex.quote(name)


def shown_pairs(pairs: Iterable[Iterable[str]]) -> str:
    """Cut node pairs as links, each quoted where a shell needs it."""
    return ", ".join(shown("->".join(pair)) for pair in pairs)


def call(run_dir: Path, request: dict[str, Any]) -> dict[str, Any]:
    """One control request. NoCluster (exit 3) when nothing serves ``run_dir``; UsageError on
    an unknown node, link, shape…; CommandFailed when the supervisor could not do it."""
    from harness.cluster.control import send_request

    response = send_request(run_dir.resolve(), request)
    if not response.get("ok"):
        error = str(response.get("error"))
        raise UsageError(error) if response.get("kind") == "usage" else CommandFailed(error)
    return response


# --- up ----------------------------------------------------------------------------------------

def start(run_dir: Path, *, brokers: int, session_timeout_ms: int, target: TargetName,
          bootstrap: str | None, network: Network, backend: Backend, foreground: bool,
          disk: DiskLayer = DiskLayer.NONE) -> int:
    """`kafka-harness up`: returns the exit code once the cluster is ready (or, in the
    foreground, once it was stopped)."""
    from harness.cluster.control import NoCluster, send_request
    from harness.cluster.factory import check_options
    from harness.cluster.local import ClusterSpec

    try:
        spec = ClusterSpec(brokers=brokers, zookeeper_session_timeout_ms=session_timeout_ms,
                           disk=disk)
        check_options(target, bootstrap, brokers, network, backend)
        if disk is not DiskLayer.NONE and (target not in BROKER_KINDS
                                           or backend is not Backend.LOCAL):
            raise ValueError("--disk needs a cluster the harness runs on the local backend "
                             "(--target reference or apache-kafka)")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    _require_kernel(network)
    run_dir = run_dir.resolve()
    try:
        send_request(run_dir, {"cmd": "status"}, timeout=10)
    except (NoCluster, OSError):
        pass
    else:
        raise CommandFailed(f"a cluster is already running in {run_dir}",
                            hint="`kafka-harness down` first")
    launch = Launch(target=target.value, bootstrap=bootstrap, network=network.value,
                    backend=backend.value)
    if foreground:
        return _up_foreground(run_dir, spec, launch)
    return _up_detached(run_dir, spec, launch)


def _require_kernel(network: Network) -> None:
    """InfrastructureError naming what is missing when the kernel mechanism cannot work."""
    if network is not Network.KERNEL:
        return
    from harness.net.netns import unavailable

    reason = unavailable()
    if reason is not None:
        raise InfrastructureError(f"cannot start: {reason}")


def _up_detached(run_dir: Path, spec: ClusterSpec, launch: Launch) -> int:
    from harness import supervisor

    console = stderr()
    process = supervisor.launch_detached(run_dir, spec, **launch)
    started = time.monotonic()
    # An image build (docker, sources changed) takes minutes; the progress line shows it.
    budget = 2 * spec.startup_timeout + 30 + (
        _IMAGE_BUILD_BUDGET_S if launch["backend"] == Backend.DOCKER else 0)

    def settled(progress: Status) -> dict[str, Any] | None:
        """The state once the supervisor is ready, failed or gone; None meanwhile."""
        state = supervisor.read_state(run_dir)
        phase = state.get("phase") if state else None
        if phase == "ready" and supervisor.socket_path(run_dir).exists():
            return state
        if phase == "failed" or process.poll() is not None:
            return state or {"phase": "failed"}
        step = state.get("step", "starting") if state else "launching the supervisor"
        progress.update(f"{step} ({time.monotonic() - started:.0f} s)")
        return None

    try:
        with console.status("starting…") as progress:
            state = wait_for(lambda: settled(progress), budget, "the cluster to be ready")
    except ClusterWaitTimeout:
        _start_failed(run_dir, supervisor.read_state(run_dir), process)
    except KeyboardInterrupt:
        process.terminate()
        process.wait()
        console.print("[yellow]interrupted: everything started was stopped[/yellow]")
        return ExitCode.INTERRUPTED
    assert state is not None  # wait_for returns only a truthy result
    if state.get("phase") != "ready":
        _start_failed(run_dir, state, process)
    console.print(f"[green]cluster ready[/green] in {time.monotonic() - started:.1f} s "
                  f"(supervisor pid {process.pid}, run dir {run_dir})")
    process.returncode = 0  # detached on purpose: it outlives this command
    print(state["bootstrap"])
    return ExitCode.OK


def _start_failed(run_dir: Path, state: dict[str, Any] | None,
                  process: subprocess.Popen[bytes] | None) -> NoReturn:
    """Show the supervisor log's tail, then raise InfrastructureError with the reason."""
    from harness.supervisor import LOG_NAME

    if process is not None and process.poll() is None:
        process.terminate()
        process.wait()
    error = (state or {}).get("error") or (
        f"the supervisor exited with code {process.returncode}" if process is not None
        else "the supervisor stopped")
    log = run_dir / LOG_NAME
    tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
    if tail:
        stderr().print(f"--- last lines of {log} ---\n{escape(tail)}", highlight=False)
    raise InfrastructureError(f"the cluster did not start: {error}")


def _up_foreground(run_dir: Path, spec: ClusterSpec, launch: Launch) -> int:
    from harness import supervisor

    run_dir.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(run_dir / supervisor.LOG_NAME)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    console = stderr()
    progress = console.status(f"starting ZooKeeper, {spec.brokers} brokers and the proxies…")
    progress.start()

    def ready(state: dict[str, Any]) -> None:
        progress.stop()
        console.print(f"[green]cluster ready[/green] (run dir {run_dir}); Ctrl-C stops it")
        print(state["bootstrap"], flush=True)

    try:
        code = supervisor.run(run_dir, spec, on_ready=ready, **launch)
    finally:
        progress.stop()
        root.removeHandler(handler)
        handler.close()
    if code == ExitCode.INFRASTRUCTURE:
        _start_failed(run_dir, supervisor.read_state(run_dir), None)
    console.print("stopped" if code == 0 else "[yellow]interrupted while starting; "
                  "everything started was stopped[/yellow]")
    return code


# --- status ------------------------------------------------------------------------------------

def show_status(run_dir: Path, as_json: bool) -> None:
    """Nodes, pids, controller, bootstrap, proxies, active faults, and what is degraded."""
    state = call(run_dir, {"cmd": "status"})["state"]
    if as_json:
        print(json.dumps(state))
        return
    console = Console()
    console.print(_node_table(state))
    if state.get("partitions"):
        console.print(_partition_table(state))
    version = f" {state['version']}" if state.get("version") else ""
    epoch = state.get("controller_epoch")
    controller = (f"; controller broker-{state['controller']} (epoch {epoch})"
                  if state.get("controller") is not None else "")
    console.print(f"brokers: {state.get('target')}{version}{controller}", highlight=False)
    console.print(f"bootstrap: [bold]{state['bootstrap']}[/bold]")
    console.print(_network_line(state), highlight=False)
    faults = state["faults"]
    if faults.get("partition"):
        console.print(f"partition (traffic dropped): {escape(shown_pairs(faults['partition']))}",
                      highlight=False)
    for link, names in (faults.get("toxics") or {}).items():
        console.print(f"toxics on {escape(shown(link))}: {escape(', '.join(names))}",
                      highlight=False)
    if state["degraded"]:
        console.print("[yellow]degraded:[/yellow] " + escape("; ".join(state["degraded"])))
    else:
        console.print("[green]healthy[/green]: every node up, no faults")


def _node_table(state: dict[str, Any]) -> Table:
    table = Table(title=f"cluster in {state['run_dir']}")
    in_docker = state.get("backend") == Backend.DOCKER
    for column in ("node", "role", "status", "container" if in_docker else "pid",
                   "address" if in_docker else "port", "client address", "registered"):
        table.add_column(column)
    colours = {"running": "green", "paused": "yellow", "down": "red"}
    for node, facts in state["nodes"].items():
        role = "controller" if node == f"broker-{state['controller']}" else ""
        registered = facts.get("registered")
        table.add_row(node, role, f"[{colours[facts['status']]}]{facts['status']}[/]",
                      facts["container"] if in_docker else str(facts["pid"] or "-"),
                      facts["address"] if in_docker else str(facts["port"]),
                      facts.get("client_address", ""),
                      "" if node == "zk" else {True: "yes", False: "no", None: "?"}[registered])
    return table


def _network_line(state: dict[str, Any]) -> str:
    if state.get("backend") == Backend.DOCKER:
        return (f"network: docker {state['docker_network']} ({state['subnet']}); "
                f"partitions by iptables in the containers, toxics in toxiproxy "
                f"{state['toxiproxy_url']} ({_toxiproxy_server(state)}"
                f"{len(state['proxies'])} proxies); everything labelled {state['run_label']}")
    if state.get("network") == Network.KERNEL:
        return (f"network: kernel (iptables drops in {len(state['namespaces'])} network "
                f"namespaces bridged in {state['hub']}, {state['subnet']}; no toxics)")
    if state.get("toxiproxy_url"):
        return (f"network: proxy (toxiproxy {state['toxiproxy_url']}, "
                f"{_toxiproxy_server(state)}{len(state['proxies'])} proxies)")
    return f"target: {state.get('target')} (no proxies: faults are not offered)"


def _partition_table(state: dict[str, Any]) -> Table:
    """Leader, ISR and leader epoch of every topic partition, as the controller recorded them."""
    table = Table(title="partitions (ZooKeeper)")
    for column in ("partition", "leader", "isr", "leader epoch"):
        table.add_column(column)
    for name, facts in state["partitions"].items():
        leader = "[red]none[/red]" if facts["leader"] < 0 else f"broker-{facts['leader']}"
        table.add_row(name, leader, ",".join(map(str, facts["isr"])), str(facts["leader_epoch"]))
    return table


def _toxiproxy_server(state: dict[str, Any]) -> str:
    """``real v2.12.0 server, `` — which Toxiproxy server runs, if the supervisor said."""
    server = state.get("toxiproxy_server")
    return f"{server} server, " if server else ""


# --- down --------------------------------------------------------------------------------------

def stop(run_dir: Path) -> None:
    """`kafka-harness down`: stop everything (and, on docker, remove every container, network
    and volume of the run, even when its supervisor was killed). Nothing running is not an
    error: the state the user asked for already holds."""
    from harness.cluster.control import NoCluster
    from harness.supervisor import process_state

    run_dir = run_dir.resolve()
    if _remove_orphaned_containers(run_dir):
        return
    try:
        pid = call(run_dir, {"cmd": "down"})["supervisor_pid"]
    except NoCluster:
        stderr().print(f"nothing running in {escape(str(run_dir))}", highlight=False)
        return
    with stderr().status("stopping the brokers, ZooKeeper and the proxies…"):
        try:
            wait_for(lambda: process_state(pid) == "down", _DOWN_TIMEOUT_S,
                     f"the supervisor (pid {pid}) to stop")
        except ClusterWaitTimeout:
            raise CommandFailed(f"the supervisor (pid {pid}) is still running") from None
    stderr().print("stopped")


def _remove_orphaned_containers(run_dir: Path) -> bool:
    """True when a docker run's supervisor died without cleaning up (SIGKILL, a crash) and
    what its label names was removed here: containers outlive their owner, processes do not."""
    from harness import supervisor

    state = supervisor.read_state(run_dir)
    if (state is None or state.get("backend") != Backend.DOCKER or not state.get("run_label")
            or state.get("phase") == "stopped"
            or supervisor.process_state(state.get("supervisor_pid")) != "down"):
        return False
    from harness.cluster.docker_backend import remove_run
    from harness.cluster.docker_images import ensure_engine

    run_id = state["run_label"].partition("=")[2]
    removed = remove_run(ensure_engine(), run_id)
    supervisor.socket_path(run_dir).unlink(missing_ok=True)
    stderr().print(f"the supervisor of {run_dir} was gone; removed {len(removed)} "
                   f"containers, networks and volumes labelled {state['run_label']}",
                   highlight=False)
    return True


def stop_all() -> None:
    """`kafka-harness down --all`: stop every supervisor of this user that still runs, wherever
    its run directory is (:mod:`harness.supervisor_registry`), then remove every container,
    network and volume labelled as the harness's — a live run's, a dead run's, a pytest
    session's. A supervisor still starting is interrupted (SIGTERM), which stops what it
    started. Local processes of a run whose supervisor died are its watchdog's to kill; those
    of a live pytest or ``run`` end with their owner and are not touched."""
    from harness import supervisor_registry

    console = stderr()
    failed = []
    cards = supervisor_registry.live()
    for card in cards:
        try:
            _stop_supervisor(card.pid, card.run_dir)
        except CommandFailed as exc:
            failed.append(str(exc))
        else:
            console.print(f"stopped the cluster in {escape(str(card.run_dir))} (supervisor pid "
                          f"{card.pid})", highlight=False)
    removed = _remove_every_labelled_object()
    if removed is None:
        console.print("no docker engine answers: no containers to remove", highlight=False)
    elif removed:
        console.print(f"removed {len(removed)} docker containers, networks and volumes "
                      f"labelled as the harness's: {escape(', '.join(removed))}",
                      highlight=False)
    if not cards and not removed:
        console.print("nothing running", highlight=False)
    if failed:
        raise CommandFailed("; ".join(failed))


def _stop_supervisor(pid: int, run_dir: Path) -> None:
    """Ask the supervisor to stop (SIGTERM if it serves no socket yet) and wait until it has."""
    from harness.cluster.control import NoCluster
    from harness.supervisor import process_state

    try:
        call(run_dir, {"cmd": "down"})
    except NoCluster:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    try:
        wait_for(lambda: process_state(pid) == "down", _DOWN_TIMEOUT_S,
                 f"the supervisor (pid {pid}) to stop")
    except ClusterWaitTimeout:
        raise CommandFailed(f"the supervisor of {run_dir} (pid {pid}) is still running") from None


def _remove_every_labelled_object() -> list[str] | None:
    """Remove every docker object with the harness's run label; None when no engine answers
    (none is started for this: an engine that is not running runs no container)."""
    from harness.cluster.docker_images import engine_client

    client = engine_client(timeout=30)
    if client is None:
        return None
    from harness.cluster.docker_backend import remove_run

    try:
        return remove_run(client)
    finally:
        client.close()


# --- faults ------------------------------------------------------------------------------------

def partition(run_dir: Path, request: dict[str, Any]) -> None:
    cut = call(run_dir, {"cmd": "partition", **request})["cut"]
    Console().print(f"partitioned: {len(cut)} directed node pairs cut: "
                    + escape(shown_pairs(cut)), highlight=False)


def read_grudge(file: Path) -> dict[str, Any]:
    try:
        document = json.loads(file.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise UsageError(f"cannot read a grudge from {file}: {exc}") from None
    if not isinstance(document, dict):
        raise UsageError(f"a grudge file holds one JSON object {{node: [nodes it cannot "
                         f"hear]}}; {file} does not")
    return document


def attribute(text: str) -> tuple[str, int | float | str]:
    """``latency=100`` → ("latency", 100)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise UsageError(f"expected key=value, got {text!r}")
    for kind in (int, float):
        try:
            return key, kind(value)
        except ValueError:
            continue
    return key, value


def lose_unflushed(run_dir: Path, node: str, as_json: bool) -> None:
    """SIGKILL a broker, cut its logs back to the last recorded fsync point, restart it."""
    response = call(run_dir, {"cmd": "lose_unflushed", "node": node})
    if as_json:
        print(json.dumps(response))
        return
    if not response["partitions"]:
        Console().print(f"{node} restarted; it had no partition logs to cut")
        return
    table = Table(title=f"{node}: unflushed data lost ({response['offsets_lost']} offsets)")
    for column in ("partition", "recovery point", "log end before", "after", "bytes cut"):
        table.add_column(column)
    for name, cut in response["partitions"].items():
        table.add_row(name, str(cut["recovery_point"]), str(cut["log_end_before"]),
                      str(cut["log_end_after"]), str(cut["bytes_cut"]))
    Console().print(table)


# --- disk faults -------------------------------------------------------------------------------

def disk(run_dir: Path, fault: DiskFault, node: str, rate: float | None = None) -> None:
    """`kafka-harness disk full|errors|heal NODE`: prints what the supervisor did."""
    request: dict[str, Any] = {"cmd": "disk", "fault": fault.value, "node": node}
    if rate is not None:
        request["rate"] = rate
    response = call(run_dir, request)
    Console().print(escape(str(response["done"])), highlight=False)
