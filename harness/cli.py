"""The `kafka-harness` command line.

This module only builds the typer app and maps options onto the library: each command's logic
lives in its own module (the checker's in harness.checker.command, the running cluster's in
harness.cluster_cli, run's and matrix's options in harness.runner_cli and harness.matrix_cli), so
adding a command is one function here. Commands raise harness.cli_errors errors, which carry
their exit code; :func:`main` is the one place that prints them and exits.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from harness import cluster_cli
from harness.cli_errors import EXIT_CODES_HELP, run_main
from harness.cli_types import (
    BOOTSTRAP_SERVER_HELP,
    DEPRECATED_BOOTSTRAP,
    Engine,
    Guarantee,
    Stream,
    ToxicType,
)
from harness.cli_types import bootstrap_server as bootstrap_server_option
from harness.cluster.factory import Backend, Network, TargetName
from harness.disk.broker_disk import DiskFault, DiskLayer
from harness.matrix_cli import register as register_matrix
from harness.runner_cli import register as register_run

DISTRIBUTION = "kafka-harness"

app = typer.Typer(
    name="kafka-harness",
    help="Kafka protocol conformance and chaos test harness.",
    epilog=EXIT_CODES_HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        print(f"kafka-harness {metadata.version(DISTRIBUTION)}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option(
        "--version", is_eager=True, callback=_print_version,
        help="Print the installed kafka-harness version and exit.")] = False,
) -> None:
    """Kafka protocol conformance and chaos test harness."""


@app.command()
def check(
    history_dir: Annotated[
        Path, typer.Argument(metavar="HISTORY_DIR", help="Directory of *.parquet / *.jsonl files.")
    ],
    guarantee: Annotated[
        Guarantee, typer.Option(help="Delivery guarantee the run must keep.")
    ] = Guarantee.AT_LEAST_ONCE,
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
    engine: Annotated[
        Engine, typer.Option(help="spark (any size) or python (small histories, no JVM; "
                                  "the same verdicts).")
    ] = Engine.SPARK,
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
        engine=engine.value,
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
# (harness.supervisor); what each does is in harness.cluster_cli.

DEFAULT_RUN_DIR = Path(".harness/current")
RunDir = Annotated[
    Path,
    typer.Option("--dir", envvar="KAFKA_HARNESS_DIR",
                 help="Run directory of the cluster (state, control socket, logs)."),
]
NodeArg = Annotated[str, typer.Argument(metavar="NODE", help="zk, broker-1 … broker-N.")]
LinkArg = Annotated[str, typer.Argument(
    metavar="LINK", help="e.g. 'client->broker-1', 'broker-1->broker-2', 'broker-2->zk' "
                         "(quoted: a shell reads > as a redirection).")]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")]


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
    raise typer.Exit(cluster_cli.start(
        run_dir, brokers=brokers, session_timeout_ms=session_timeout_ms, target=target,
        bootstrap=bootstrap_server_option(bootstrap_server, bootstrap), network=network,
        backend=backend, foreground=foreground, disk=disk))


@app.command()
def status(run_dir: RunDir = DEFAULT_RUN_DIR, json_output: JsonFlag = False) -> None:
    """Nodes, pids, controller, bootstrap, proxies, active faults, and what is degraded."""
    cluster_cli.show_status(run_dir, json_output)


@app.command()
def down(run_dir: RunDir = DEFAULT_RUN_DIR,
         every: Annotated[bool, typer.Option(
             "--all", help="Every cluster, not only DIR's: every supervisor of this user "
             "wherever its run dir is, and every docker container, network and volume "
             "labelled as the harness's, dead runs' included.")] = False) -> None:
    """Stop everything: brokers, ZooKeeper, proxies, the supervisor (and, on docker, every
    container, network and volume of the run, even when its supervisor was killed). Exit 0
    also when nothing was running."""
    if every:
        cluster_cli.stop_all()
    else:
        cluster_cli.stop(run_dir)


partition_app = typer.Typer(name="partition", no_args_is_help=True,
                            help="Cut the network into a shape (replaces any partition).")
app.add_typer(partition_app)


@partition_app.command()
def isolate(node: NodeArg, run_dir: RunDir = DEFAULT_RUN_DIR) -> None:
    """Cut NODE off from every other node, both ways."""
    cluster_cli.partition(run_dir, {"shape": "isolate", "node": node})


@partition_app.command()
def halves(run_dir: RunDir = DEFAULT_RUN_DIR) -> None:
    """Split the brokers into two halves that cannot hear each other."""
    cluster_cli.partition(run_dir, {"shape": "halves"})


@partition_app.command()
def ring(run_dir: RunDir = DEFAULT_RUN_DIR) -> None:
    """Jepsen's majorities ring over the brokers."""
    cluster_cli.partition(run_dir, {"shape": "ring"})


@partition_app.command()
def bridge(run_dir: RunDir = DEFAULT_RUN_DIR) -> None:
    """Two halves of the brokers joined only through one bridge broker."""
    cluster_cli.partition(run_dir, {"shape": "bridge"})


@partition_app.command()
def grudge(file: Annotated[Path, typer.Argument(metavar="FILE",
                                                help="JSON {node: [nodes it cannot hear]}.")],
           run_dir: RunDir = DEFAULT_RUN_DIR) -> None:
    """An explicit grudge read from a JSON file."""
    cluster_cli.partition(run_dir, {"shape": "grudge", "grudge": cluster_cli.read_grudge(file)})


@app.command()
def heal(run_dir: RunDir = DEFAULT_RUN_DIR) -> None:
    """Remove every partition cut (other toxics stay)."""
    cluster_cli.call(run_dir, {"cmd": "heal"})
    Console().print("healed")


toxic_app = typer.Typer(name="toxic", no_args_is_help=True, help="Add or remove Toxiproxy toxics.")
app.add_typer(toxic_app)


@toxic_app.command("add")
def toxic_add(
    link: LinkArg,
    type_: Annotated[ToxicType, typer.Argument(metavar="TYPE", help="The toxic's type.")],
    attr: Annotated[list[str] | None, typer.Option(
        "--attr", metavar="K=V", help="Toxic attribute (repeatable), e.g. latency=100.")] = None,
    stream: Annotated[Stream, typer.Option(help="up: bytes the link's left node sends; "
                                                "down: bytes it receives.")] = Stream.DOWN,
    toxicity: Annotated[float, typer.Option(min=0.0, max=1.0)] = 1.0,
    name: Annotated[str | None, typer.Option(help="Default <type>_<stream>.")] = None,
    run_dir: RunDir = DEFAULT_RUN_DIR,
) -> None:
    """Add a toxic to one link; prints its name."""
    attributes = dict(cluster_cli.attribute(item) for item in attr or [])
    response = cluster_cli.call(run_dir, {
        "cmd": "toxic_add", "link": link, "type": type_.value, "attributes": attributes,
        "stream": f"{stream.value}stream", "toxicity": toxicity, "name": name})
    print(response["name"])


@toxic_app.command("remove")
def toxic_remove(link: LinkArg, name: Annotated[str, typer.Argument(metavar="NAME")],
                 run_dir: RunDir = DEFAULT_RUN_DIR) -> None:
    """Remove a toxic from one link."""
    cluster_cli.call(run_dir, {"cmd": "toxic_remove", "link": link, "name": name})
    Console().print(f"removed {escape(cluster_cli.shown(name))} from "
                    f"{escape(cluster_cli.shown(link))}", highlight=False)


_PROCESS_FAULTS = {
    "kill": ("SIGKILL the node (a crash).", "killed"),
    "pause": ("SIGSTOP the node: it hangs with its connections open.", "paused"),
    "resume": ("SIGCONT a paused node.", "resumed"),
    "stop": ("SIGTERM: graceful stop (controlled shutdown for a broker).", "stopped"),
    "restart": ("Stop the node if running, start it again; returns when it serves.", "restarted"),
}


def _register_process_fault(action: str, help_text: str, done: str) -> None:
    def command(node: NodeArg, run_dir: RunDir = DEFAULT_RUN_DIR) -> None:
        cluster_cli.call(run_dir, {"cmd": action, "node": node})
        Console().print(f"{done} {escape(cluster_cli.shown(node))}", highlight=False)

    app.command(name=action, help=help_text)(command)


for _action, (_help, _done) in _PROCESS_FAULTS.items():
    _register_process_fault(_action, _help, _done)


disk_app = typer.Typer(name="disk", no_args_is_help=True,
                       help="Disk faults on a broker's log dir (a cluster started with --disk).")
app.add_typer(disk_app)


@disk_app.command("full")
def disk_full(node: NodeArg, run_dir: RunDir = DEFAULT_RUN_DIR) -> None:
    """Fill the broker's disk to the last byte: its writes fail with ENOSPC."""
    cluster_cli.disk(run_dir, DiskFault.FULL, node)


@disk_app.command("errors")
def disk_errors(node: NodeArg, rate: Annotated[float, typer.Option(
        min=0.0, max=1.0, help="Share of reads and writes that fail.")] = 0.5,
                run_dir: RunDir = DEFAULT_RUN_DIR) -> None:
    """Reads and writes under the broker's log dir fail with EIO at RATE (needs --disk faulty)."""
    cluster_cli.disk(run_dir, DiskFault.ERRORS, node, rate)


@disk_app.command("heal")
def disk_heal(node: NodeArg, run_dir: RunDir = DEFAULT_RUN_DIR) -> None:
    """Free the disk, stop the errors, and start the broker again if it halted."""
    cluster_cli.disk(run_dir, DiskFault.HEAL, node)


@app.command("lose-unflushed")
def lose_unflushed(node: NodeArg, run_dir: RunDir = DEFAULT_RUN_DIR,
                   json_output: JsonFlag = False) -> None:
    """SIGKILL a broker, cut its logs back to the last recorded fsync point, restart it."""
    cluster_cli.lose_unflushed(run_dir, node, json_output)


register_run(app)
register_matrix(app)


def main() -> None:
    """The `kafka-harness` program: every error that carries an exit code (harness.cli_errors)
    is printed as one line on stderr and gives its code."""
    run_main(app)


if __name__ == "__main__":
    main()
