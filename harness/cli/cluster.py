"""`kafka-harness up`, `status` and `down`: start a cluster that outlives the command, look at
it, and stop it (or every cluster of this user).

``up`` launches the supervisor (:mod:`harness.supervisor`) — detached, or in this terminal with
``--foreground`` — and waits for its ``state.json`` to say ready; ``status`` and ``down`` are
requests to its control socket. ``down`` also removes what a docker run's dead supervisor left.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.markup import escape
from rich.status import Status

from harness.cli import status as status_command
from harness.cli.control import DEFAULT_RUN_DIR, JsonFlag, RunDir, call, stderr
from harness.cli.options import BOOTSTRAP_SERVER_HELP, DEPRECATED_BOOTSTRAP
from harness.cli.options import bootstrap_server as bootstrap_server_option
from harness.cluster.docker.engine import engine_client, ensure_engine
from harness.cluster.docker.reaping import remove_run
from harness.cluster.options import DISK_TARGETS, Backend, Network, TargetName, check_options
from harness.cluster.spec import ClusterSpec
from harness.disk.broker_disk import DiskLayer
from harness.errors import CommandFailed, ExitCode, InfrastructureError, UsageError
from harness.lifecycle.procfs import process_state
from harness.net.netns_support import unavailable
from harness.supervisor import registry as supervisor_registry
from harness.supervisor.control import NoCluster, send_request, socket_path
from harness.supervisor.files import LOG_NAME, read_state
from harness.supervisor.launch import Launch, launch_detached
from harness.waiting import ClusterWaitTimeout, wait_for

_IMAGE_BUILD_BUDGET_S = 900
_DOWN_TIMEOUT_S = 180


def register(app: typer.Typer) -> None:
    """Add ``up``, ``status`` and ``down`` to ``app``."""
    app.command()(up)
    app.command()(status)
    app.command()(down)


def up(
    brokers: Annotated[int, typer.Option(help="Number of brokers (KRaft: of nodes, each also a "
                                             "voter of the controller quorum, unless "
                                             "--controllers).")] = 3,
    controllers: Annotated[int, typer.Option(
        help="apache-kafka-kraft: this many dedicated controllers form the quorum (Kafka's "
             "production layout, nodes controller-<id> after the brokers' ids); 0 = every "
             "broker is also a voter.")] = 0,
    run_dir: RunDir = DEFAULT_RUN_DIR,
    foreground: Annotated[
        bool, typer.Option("--foreground", help="Run in this terminal; Ctrl-C = down.")
    ] = False,
    session_timeout_ms: Annotated[
        int, typer.Option(help="zookeeper.session.timeout.ms of the brokers.")
    ] = 6000,
    target: Annotated[
        TargetName, typer.Option(help="reference or apache-kafka (ZooKeeper + brokers with "
                                      "every fault), apache-kafka-kraft (N KRaft nodes, each a "
                                      "broker and a controller, every fault on the proxy "
                                      "network), tansu, kfake, librdkafka-mock or external (no "
                                      "faults: see `status`).")
    ] = TargetName.REFERENCE,
    bootstrap_server: Annotated[
        str | None, typer.Option("--bootstrap-server", metavar="HOST:PORT[,...]",
                                 help=BOOTSTRAP_SERVER_HELP)
    ] = None,
    bootstrap: Annotated[
        str | None, typer.Option(DEPRECATED_BOOTSTRAP, hidden=True)
    ] = None,
    network: Annotated[
        Network, typer.Option(help="How network faults are made: proxy (Toxiproxy on every "
                                   "link) or kernel (root: namespaces + iptables drops, no "
                                   "toxics).")
    ] = Network.PROXY,
    backend: Annotated[
        Backend, typer.Option(help="Where the nodes run: local processes, or docker containers "
                                   "(links through a Toxiproxy container, partitions by "
                                   "iptables inside the containers).")
    ] = Backend.LOCAL,
    disk: Annotated[
        DiskLayer, typer.Option(help="What each broker's log dir sits on (root, local backend): "
                                     "none; limited (a size-limited tmpfs: `disk full`); faulty "
                                     "(the tmpfs through a FUSE filesystem: `disk errors` too).")
    ] = DiskLayer.NONE,
) -> None:
    """Start ZooKeeper + brokers with every link behind Toxiproxy (or in network namespaces,
    in containers, or a peer target); return when ready and print the bootstrap address. Exit
    3 if it could not start."""
    raise typer.Exit(start(
        run_dir, brokers=brokers, session_timeout_ms=session_timeout_ms, target=target,
        bootstrap=bootstrap_server_option(bootstrap_server, bootstrap), network=network,
        backend=backend, foreground=foreground, disk=disk, controllers=controllers))


def status(run_dir: RunDir = DEFAULT_RUN_DIR, json_output: JsonFlag = False) -> None:
    """Nodes, pids, controller, bootstrap, proxies, active faults, and what is degraded."""
    status_command.show_status(run_dir, json_output)


def down(run_dir: RunDir = DEFAULT_RUN_DIR,
         every: Annotated[bool, typer.Option(
             "--all", help="Every cluster, not only DIR's: every supervisor of this user "
             "wherever its run dir is, and every docker container, network and volume "
             "labelled as the harness's, dead runs' included.")] = False) -> None:
    """Stop everything: brokers, ZooKeeper, proxies, the supervisor (and, on docker, every
    container, network and volume of the run, even when its supervisor was killed). Exit 0
    also when nothing was running."""
    if every:
        stop_all()
    else:
        stop(run_dir)


# --- up ----------------------------------------------------------------------------------------

def start(run_dir: Path, *, brokers: int, session_timeout_ms: int, target: TargetName,
          bootstrap: str | None, network: Network, backend: Backend, foreground: bool,
          disk: DiskLayer = DiskLayer.NONE, controllers: int = 0) -> int:
    """`kafka-harness up`: returns the exit code once the cluster is ready (or, in the
    foreground, once it was stopped)."""
    try:
        check_options(target, bootstrap, brokers, network, backend, controllers=controllers)
        spec = ClusterSpec(brokers=brokers, controllers=controllers,
                           zookeeper_session_timeout_ms=session_timeout_ms, disk=disk)
        if disk is not DiskLayer.NONE and (target not in DISK_TARGETS
                                           or backend is not Backend.LOCAL):
            raise ValueError("--disk needs a cluster the harness runs on the local backend "
                             f"(--target {' or '.join(DISK_TARGETS)})")
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
    launch = Launch(target, bootstrap, network, backend)
    if foreground:
        return _up_foreground(run_dir, spec, launch)
    return _up_detached(run_dir, spec, launch)


def _require_kernel(network: Network) -> None:
    """InfrastructureError naming what is missing when the kernel mechanism cannot work."""
    if network is not Network.KERNEL:
        return
    reason = unavailable()
    if reason is not None:
        raise InfrastructureError(f"cannot start: {reason}")


def _up_detached(run_dir: Path, spec: ClusterSpec, launch: Launch) -> int:
    console = stderr()
    process = launch_detached(run_dir, spec, launch)
    started = time.monotonic()
    # An image build (docker, sources changed) takes minutes; the progress line shows it.
    budget = 2 * spec.startup_timeout + 30 + (
        _IMAGE_BUILD_BUDGET_S if launch.backend is Backend.DOCKER else 0)

    def settled(progress: Status) -> dict[str, Any] | None:
        """The state once the supervisor is ready, failed or gone; None meanwhile."""
        state = read_state(run_dir)
        phase = state.get("phase") if state else None
        if phase == "ready" and socket_path(run_dir).exists():
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
        _start_failed(run_dir, read_state(run_dir), process)
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
    # The supervisor runs in this process: only here is what it runs (every cluster kind, the
    # clients) loaded, so that the other commands, and --help, start without it.
    from harness.supervisor import owner

    run_dir.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(run_dir / LOG_NAME)
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
        code = owner.run(run_dir, spec, launch, on_ready=ready)
    finally:
        progress.stop()
        root.removeHandler(handler)
        handler.close()
    if code == ExitCode.INFRASTRUCTURE:
        _start_failed(run_dir, read_state(run_dir), None)
    console.print("stopped" if code == 0 else "[yellow]interrupted while starting; "
                  "everything started was stopped[/yellow]")
    return code


# --- down --------------------------------------------------------------------------------------

def stop(run_dir: Path) -> None:
    """`kafka-harness down`: stop everything (and, on docker, remove every container, network
    and volume of the run, even when its supervisor was killed). Nothing running is not an
    error: the state the user asked for already holds."""
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
    state = read_state(run_dir)
    if (state is None or state.get("backend") != Backend.DOCKER or not state.get("run_label")
            or state.get("phase") == "stopped"
            or process_state(state.get("supervisor_pid")) != "down"):
        return False
    run_id = state["run_label"].partition("=")[2]
    removed = remove_run(ensure_engine(), run_id)
    socket_path(run_dir).unlink(missing_ok=True)
    stderr().print(f"the supervisor of {run_dir} was gone; removed {len(removed)} "
                   f"containers, networks and volumes labelled {state['run_label']}",
                   highlight=False)
    return True


def stop_all() -> None:
    """`kafka-harness down --all`: stop every supervisor of this user that still runs, wherever
    its run directory is (:mod:`harness.supervisor.registry`), then remove every container,
    network and volume labelled as the harness's — a live run's, a dead run's, a pytest
    session's. A supervisor still starting is interrupted (SIGTERM), which stops what it
    started. Local processes of a run whose supervisor died are its watchdog's to kill; those
    of a live pytest or ``run`` end with their owner and are not touched."""
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
    client = engine_client(timeout=30)
    if client is None:
        return None
    try:
        return remove_run(client)
    finally:
        client.close()
