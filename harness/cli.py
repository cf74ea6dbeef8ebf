"""The `kafka-harness` command line.

This module only builds the typer app and maps options onto the library: each command's logic
lives in its own package (the checker's in harness.checker.command), so adding a command is one
function here.
"""

from __future__ import annotations

import json
import time
from enum import Enum, StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from harness.checker.result import DEFAULT_GUARANTEE, GUARANTEES
from harness.cluster.factory import Backend, Network, TargetName
from harness.matrix_cli import register as register_matrix
from harness.runner_cli import register as register_run

app = typer.Typer(
    name="kafka-harness",
    help="Kafka protocol conformance and chaos test harness.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Built from GUARANTEES so the CLI's choices cannot drift from the checker's; mypy cannot see
# the members of an Enum made at runtime.
Guarantee = Enum("Guarantee", {name: name for name in GUARANTEES}, type=str)  # type: ignore[misc]


_DEFAULT_GUARANTEE = Guarantee(DEFAULT_GUARANTEE)


@app.callback()
def _root() -> None:
    """Kafka protocol conformance and chaos test harness."""


@app.command()
def check(
    history_dir: Annotated[
        Path, typer.Argument(metavar="HISTORY_DIR", help="Directory of *.parquet / *.jsonl files.")
    ],
    guarantee: Annotated[
        Guarantee, typer.Option(help="Delivery guarantee the run must keep.")
    ] = _DEFAULT_GUARANTEE,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print one JSON object on stdout.")
    ] = False,
    master: Annotated[
        str | None,
        typer.Option(
            metavar="SPARK_MASTER",
            help="Spark master (spark://…, sc://… for Spark Connect); default $SPARK_REMOTE, "
            "$SPARK_MASTER, else local[*].",
        ),
    ] = None,
    report_dir: Annotated[
        Path | None,
        typer.Option(
            "--report", metavar="OUT_DIR", help="Write report.html, report.json, junit.xml."
        ),
    ] = None,
) -> None:
    """Check a history against a delivery guarantee: exit 0 valid, 1 invalid, 2 bad input,
    3 Spark could not start."""
    from harness.checker import command

    code = command.run(
        history_dir,
        guarantee.value,
        master=master,
        as_json=json_output,
        report_dir=report_dir,
    )
    raise typer.Exit(code)


@app.command()
def demo(
    records: Annotated[int, typer.Option(help="Records to produce and read back.")] = 10_000,
    run_dir: Annotated[
        Path | None, typer.Option("--dir", help="Run directory (kept); default a temp dir.")
    ] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print one JSON object on stdout.")
    ] = False,
) -> None:
    """The main job for now: start a reference broker, produce, consume, restart, read back.
    Exit 0 when every record came back once and in order, 1 if not, 3 if the broker could not
    start."""
    from harness import demo as round_trip

    raise typer.Exit(round_trip.run_command(records, run_dir, json_output))


# --- the running cluster: up, status, down, and faults on demand ------------------------------
#
# Each command below is a separate process talking to the supervisor's control socket
# (harness.supervisor); the supervisor is the only owner of the cluster.

DEFAULT_RUN_DIR = Path(".harness/current")
RunDir = Annotated[
    Path,
    typer.Option("--dir", envvar="KAFKA_HARNESS_DIR",
                 help="Run directory of the cluster (state, control socket, logs)."),
]
NodeArg = Annotated[str, typer.Argument(metavar="NODE", help="zk, broker-1 … broker-N.")]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")]


def _stderr() -> Console:
    return Console(stderr=True)


def _call(run_dir: Path, request: dict[str, Any]) -> dict[str, Any]:
    """One control request; exits 3 when no cluster runs there, 2 on a usage error (unknown
    node, link, shape…), 1 when the command failed."""
    from harness.cluster.control import NoCluster, send_request

    try:
        response = send_request(run_dir.resolve(), request)
    except NoCluster as exc:
        _stderr().print(f"[red]{escape(str(exc))}[/red] (start one with `kafka-harness up`)")
        raise typer.Exit(3) from None
    if not response.get("ok"):
        _stderr().print(f"[red]error:[/red] {escape(str(response.get('error')))}")
        raise typer.Exit(2 if response.get("kind") == "usage" else 1)
    return response


@app.command()
def up(
    brokers: Annotated[int, typer.Option(help="Number of reference brokers.")] = 3,
    run_dir: RunDir = DEFAULT_RUN_DIR,
    foreground: Annotated[
        bool, typer.Option("--foreground", help="Run in this terminal; Ctrl-C = down.")
    ] = False,
    session_timeout_ms: Annotated[
        int, typer.Option(help="zookeeper.session.timeout.ms of the brokers.")
    ] = 6000,
    target: Annotated[
        TargetName, typer.Option(help="reference or apache-kafka (ZooKeeper + brokers with "
                                      "every fault), apache-kafka-kraft, tansu, librdkafka-mock "
                                      "or external (no faults: see `status`).")
    ] = TargetName.REFERENCE,
    bootstrap: Annotated[
        str | None, typer.Option(help="Bootstrap servers of an external target.")
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
) -> None:
    """Start ZooKeeper + brokers with every link behind Toxiproxy (or in network namespaces,
    in containers, or a peer target); return when ready and print the bootstrap address. Exit
    3 if it could not start."""
    from harness.cluster.control import NoCluster, send_request
    from harness.cluster.factory import check_options
    from harness.cluster.local import ClusterSpec

    try:
        spec = ClusterSpec(brokers=brokers, zookeeper_session_timeout_ms=session_timeout_ms)
        check_options(target, bootstrap, brokers, network, backend)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    _require_kernel(network)
    run_dir = run_dir.resolve()
    try:
        send_request(run_dir, {"cmd": "status"}, timeout=10)
    except (NoCluster, OSError):
        pass
    else:
        _stderr().print(f"[red]a cluster is already running in {run_dir}[/red] "
                        "(`kafka-harness down` first)")
        raise typer.Exit(1)
    launch = {"target": target.value, "bootstrap": bootstrap, "network": network.value,
              "backend": backend.value}
    if foreground:
        raise typer.Exit(_up_foreground(run_dir, spec, launch))
    raise typer.Exit(_up_detached(run_dir, spec, launch))


def _require_kernel(network: Network) -> None:
    """Exit 3 (infrastructure) naming what is missing when the kernel mechanism cannot work."""
    if network is not Network.KERNEL:
        return
    from harness.net.netns import unavailable

    reason = unavailable()
    if reason is not None:
        _stderr().print(f"[red]cannot start:[/red] {escape(reason)}")
        raise typer.Exit(3)


_IMAGE_BUILD_BUDGET_S = 900


def _up_detached(run_dir: Path, spec: Any, launch: dict[str, Any]) -> int:
    from harness import supervisor

    console = _stderr()
    process = supervisor.launch_detached(run_dir, spec, **launch)
    started = time.monotonic()
    # An image build (docker, sources changed) takes minutes; the progress line shows it.
    deadline = started + 2 * spec.startup_timeout + 30 + (
        _IMAGE_BUILD_BUDGET_S if launch["backend"] == "docker" else 0)
    state: dict[str, Any] | None = None
    try:
        with console.status("starting…") as progress:
            while True:
                state = supervisor.read_state(run_dir)
                phase = state.get("phase") if state else None
                if phase == "ready" and supervisor.socket_path(run_dir).exists():
                    break
                if phase == "failed" or process.poll() is not None or time.monotonic() > deadline:
                    return _start_failed(run_dir, state, process)
                step = state.get("step", "starting") if state else "launching the supervisor"
                progress.update(f"{step} ({time.monotonic() - started:.0f} s)")
                time.sleep(0.1)
    except KeyboardInterrupt:
        process.terminate()
        process.wait()
        console.print("[yellow]interrupted: everything started was stopped[/yellow]")
        return 130
    assert state is not None
    console.print(f"[green]cluster ready[/green] in {time.monotonic() - started:.1f} s "
                  f"(supervisor pid {process.pid}, run dir {run_dir})")
    process.returncode = 0  # detached on purpose: it outlives this command
    print(state["bootstrap"])
    return 0


def _start_failed(run_dir: Path, state: dict[str, Any] | None, process: Any) -> int:
    from harness.supervisor import LOG_NAME

    if process.poll() is None:
        process.terminate()
        process.wait()
    error = (state or {}).get("error") or f"the supervisor exited with code {process.returncode}"
    log = run_dir / LOG_NAME
    tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
    console = _stderr()
    console.print(f"[red]the cluster did not start:[/red] {escape(error)}")
    if tail:
        console.print(f"--- last lines of {log} ---\n{escape(tail)}")
    return 3


def _up_foreground(run_dir: Path, spec: Any, launch: dict[str, Any]) -> int:
    import logging

    from harness import supervisor

    run_dir.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(run_dir / supervisor.LOG_NAME)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    console = _stderr()
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
    if code == 3:
        return _start_failed(run_dir, supervisor.read_state(run_dir), _Exited(3))
    console.print("stopped" if code == 0 else "[yellow]interrupted while starting; "
                  "everything started was stopped[/yellow]")
    return code


class _Exited:
    """A finished process, for _start_failed when the supervisor ran in this process."""

    def __init__(self, code: int) -> None:
        self.returncode = code

    def poll(self) -> int:
        return self.returncode


@app.command()
def status(run_dir: RunDir = DEFAULT_RUN_DIR, json_output: JsonFlag = False) -> None:
    """Nodes, pids, controller, bootstrap, proxies, active faults, and what is degraded."""
    state = _call(run_dir, {"cmd": "status"})["state"]
    if json_output:
        print(json.dumps(state))
        return
    console = Console()
    table = Table(title=f"cluster in {state['run_dir']}")
    in_docker = state.get("backend") == "docker"
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
    console.print(table)
    if state.get("partitions"):
        console.print(_partition_table(state))
    version = f" {state['version']}" if state.get("version") else ""
    epoch = state.get("controller_epoch")
    controller = (f"; controller broker-{state['controller']} (epoch {epoch})"
                  if state.get("controller") is not None else "")
    console.print(f"brokers: {state.get('target')}{version}{controller}")
    console.print(f"bootstrap: [bold]{state['bootstrap']}[/bold]")
    if in_docker:
        console.print(f"network: docker {state['docker_network']} ({state['subnet']}); "
                      f"partitions by iptables in the containers, toxics in toxiproxy "
                      f"{state['toxiproxy_url']} ({_toxiproxy_server(state)}"
                      f"{len(state['proxies'])} proxies); "
                      f"everything labelled {state['run_label']}")
    elif state.get("network") == "kernel":
        console.print(f"network: kernel (iptables drops in {len(state['namespaces'])} network "
                      f"namespaces bridged in {state['hub']}, {state['subnet']}; no toxics)")
    elif state.get("toxiproxy_url"):
        console.print(f"network: proxy (toxiproxy {state['toxiproxy_url']}, "
                      f"{_toxiproxy_server(state)}{len(state['proxies'])} proxies)")
    else:
        console.print(f"target: {state.get('target')} (no proxies: faults are not offered)")
    faults = state["faults"]
    if faults.get("partition"):
        cut = ", ".join(f"{sender}->{receiver}" for sender, receiver in faults["partition"])
        console.print(f"partition (traffic dropped): {cut}")
    for link, names in (faults.get("toxics") or {}).items():
        console.print(f"toxics on {link}: {', '.join(names)}")
    if state["degraded"]:
        console.print("[yellow]degraded:[/yellow] " + "; ".join(state["degraded"]))
    else:
        console.print("[green]healthy[/green]: every node up, no faults")


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


@app.command()
def down(run_dir: RunDir = DEFAULT_RUN_DIR) -> None:
    """Stop everything: brokers, ZooKeeper, proxies, the supervisor (and, on docker, every
    container, network and volume of the run, even when its supervisor was killed)."""
    from harness.supervisor import process_state

    if _remove_orphaned_containers(run_dir.resolve()):
        return
    pid = _call(run_dir, {"cmd": "down"})["supervisor_pid"]
    console = _stderr()
    deadline = time.monotonic() + 180
    with console.status("stopping the brokers, ZooKeeper and the proxies…"):
        while process_state(pid) != "down":
            if time.monotonic() > deadline:
                console.print(f"[red]the supervisor (pid {pid}) is still running[/red]")
                raise typer.Exit(1)
            time.sleep(0.1)
    console.print("stopped")


def _remove_orphaned_containers(run_dir: Path) -> bool:
    """True when a docker run's supervisor died without cleaning up (SIGKILL, a crash) and
    what its label names was removed here: containers outlive their owner, processes do not."""
    from harness import supervisor

    state = supervisor.read_state(run_dir)
    if (state is None or state.get("backend") != "docker" or not state.get("run_label")
            or state.get("phase") == "stopped"
            or supervisor.process_state(state.get("supervisor_pid")) != "down"):
        return False
    from harness.cluster.docker_backend import remove_run
    from harness.cluster.docker_images import ensure_engine

    run_id = state["run_label"].partition("=")[2]
    removed = remove_run(ensure_engine(), run_id)
    supervisor.socket_path(run_dir).unlink(missing_ok=True)
    _stderr().print(f"the supervisor of {run_dir} was gone; removed {len(removed)} "
                    f"containers, networks and volumes labelled {state['run_label']}")
    return True


partition_app = typer.Typer(name="partition", no_args_is_help=True,
                            help="Cut the network into a shape (replaces any partition).")
app.add_typer(partition_app)


def _partition(run_dir: Path, request: dict[str, Any]) -> None:
    cut = _call(run_dir, {"cmd": "partition", **request})["cut"]
    Console().print(f"partitioned: {len(cut)} directed node pairs cut: "
                    + ", ".join(f"{sender}->{receiver}" for sender, receiver in cut))


@partition_app.command()
def isolate(node: Annotated[str, typer.Argument(metavar="NODE")],
            run_dir: RunDir = DEFAULT_RUN_DIR) -> None:
    """Cut NODE off from every other node, both ways."""
    _partition(run_dir, {"shape": "isolate", "node": node})


@partition_app.command()
def halves(run_dir: RunDir = DEFAULT_RUN_DIR) -> None:
    """Split the brokers into two halves that cannot hear each other."""
    _partition(run_dir, {"shape": "halves"})


@partition_app.command()
def ring(run_dir: RunDir = DEFAULT_RUN_DIR) -> None:
    """Jepsen's majorities ring over the brokers."""
    _partition(run_dir, {"shape": "ring"})


@partition_app.command()
def bridge(run_dir: RunDir = DEFAULT_RUN_DIR) -> None:
    """Two halves of the brokers joined only through one bridge broker."""
    _partition(run_dir, {"shape": "bridge"})


@partition_app.command()
def grudge(file: Annotated[Path, typer.Argument(metavar="FILE",
                                                help="JSON {node: [nodes it cannot hear]}.")],
           run_dir: RunDir = DEFAULT_RUN_DIR) -> None:
    """An explicit grudge read from a JSON file."""
    try:
        document = json.loads(file.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise typer.BadParameter(f"cannot read a grudge from {file}: {exc}") from None
    _partition(run_dir, {"shape": "grudge", "grudge": document})


@app.command()
def heal(run_dir: RunDir = DEFAULT_RUN_DIR) -> None:
    """Remove every partition cut (other toxics stay)."""
    _call(run_dir, {"cmd": "heal"})
    Console().print("healed")


toxic_app = typer.Typer(name="toxic", no_args_is_help=True, help="Add or remove Toxiproxy toxics.")
app.add_typer(toxic_app)


class Stream(StrEnum):
    up = "up"
    down = "down"


def _attribute(text: str) -> tuple[str, int | float | str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise typer.BadParameter(f"expected key=value, got {text!r}")
    for kind in (int, float):
        try:
            return key, kind(value)
        except ValueError:
            continue
    return key, value


@toxic_app.command("add")
def toxic_add(
    link: Annotated[str, typer.Argument(metavar="LINK", help="e.g. client->broker-1.")],
    type_: Annotated[str, typer.Argument(metavar="TYPE", help="latency, bandwidth, timeout, …")],
    attr: Annotated[list[str] | None, typer.Option(
        "--attr", metavar="K=V", help="Toxic attribute (repeatable), e.g. latency=100.")] = None,
    stream: Annotated[Stream, typer.Option(help="up: bytes the link's left node sends; "
                                                "down: bytes it receives.")] = Stream.down,
    toxicity: Annotated[float, typer.Option(min=0.0, max=1.0)] = 1.0,
    name: Annotated[str | None, typer.Option(help="Default <type>_<stream>.")] = None,
    run_dir: RunDir = DEFAULT_RUN_DIR,
) -> None:
    """Add a toxic to one link; prints its name."""
    attributes = dict(_attribute(item) for item in attr or [])
    response = _call(run_dir, {"cmd": "toxic_add", "link": link, "type": type_,
                               "attributes": attributes, "stream": f"{stream.value}stream",
                               "toxicity": toxicity, "name": name})
    print(response["name"])


@toxic_app.command("remove")
def toxic_remove(
    link: Annotated[str, typer.Argument(metavar="LINK")],
    name: Annotated[str, typer.Argument(metavar="NAME")],
    run_dir: RunDir = DEFAULT_RUN_DIR,
) -> None:
    """Remove a toxic from one link."""
    _call(run_dir, {"cmd": "toxic_remove", "link": link, "name": name})
    Console().print(f"removed {name} from {link}")


_PROCESS_FAULTS = {
    "kill": ("SIGKILL the node (a crash).", "killed"),
    "pause": ("SIGSTOP the node: it hangs with its connections open.", "paused"),
    "resume": ("SIGCONT a paused node.", "resumed"),
    "stop": ("SIGTERM: graceful stop (controlled shutdown for a broker).", "stopped"),
    "restart": ("Stop the node if running, start it again; returns when it serves.", "restarted"),
}


def _register_process_fault(action: str, help_text: str, done: str) -> None:
    def command(node: NodeArg, run_dir: RunDir = DEFAULT_RUN_DIR) -> None:
        _call(run_dir, {"cmd": action, "node": node})
        Console().print(f"{done} {node}")

    app.command(name=action, help=help_text)(command)


for _action, (_help, _done) in _PROCESS_FAULTS.items():
    _register_process_fault(_action, _help, _done)


@app.command("lose-unflushed")
def lose_unflushed(node: NodeArg, run_dir: RunDir = DEFAULT_RUN_DIR,
                   json_output: JsonFlag = False) -> None:
    """SIGKILL a broker, cut its logs back to the last recorded fsync point, restart it."""
    response = _call(run_dir, {"cmd": "lose_unflushed", "node": node})
    if json_output:
        print(json.dumps(response))
        return
    if not response["partitions"]:
        Console().print(f"{node} restarted; it had no partition logs to cut")
        return
    table = Table(title=f"{node}: unflushed data lost ({response['offsets_lost']} offsets)")
    for column in ("partition", "recovery point", "log end before", "after", "bytes cut"):
        table.add_column(column)
    for partition, cut in response["partitions"].items():
        table.add_row(partition, str(cut["recovery_point"]), str(cut["log_end_before"]),
                      str(cut["log_end_after"]), str(cut["bytes_cut"]))
    Console().print(table)


register_run(app)
register_matrix(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
