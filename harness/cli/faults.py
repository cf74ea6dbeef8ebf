"""Faults on demand on a running cluster: partitions of any shape, heal, Toxiproxy toxics,
process faults (kill, pause, resume, stop, restart, lose-unflushed) and disk faults.

Each command is one control request to the cluster's supervisor (:func:`harness.cli.control.call`)
and one line saying what was done; the supervisor, which owns the cluster, does the fault.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from harness.cli.control import (
    DEFAULT_RUN_DIR,
    JsonFlag,
    LinkArg,
    NodeArg,
    RunDir,
    call,
    shown,
    shown_pairs,
)
from harness.cli.options import Stream, ToxicType
from harness.disk.broker_disk import DiskFault
from harness.errors import UsageError


def register(app: typer.Typer) -> None:
    """Add the fault commands to ``app``, in the order ``--help`` lists them."""
    app.add_typer(partition_app)
    app.command()(heal)
    app.add_typer(toxic_app)
    for action, (help_text, done) in _PROCESS_FAULTS.items():
        _register_process_fault(app, action, help_text, done)
    app.add_typer(disk_app)
    app.command("lose-unflushed")(lose_unflushed_command)


partition_app = typer.Typer(name="partition", no_args_is_help=True,
                            help="Cut the network into a shape (replaces any partition).")


@partition_app.command()
def isolate(node: NodeArg, run_dir: RunDir = DEFAULT_RUN_DIR) -> None:
    """Cut NODE off from every other node, both ways."""
    partition(run_dir, {"shape": "isolate", "node": node})


@partition_app.command()
def halves(run_dir: RunDir = DEFAULT_RUN_DIR) -> None:
    """Split the brokers into two halves that cannot hear each other."""
    partition(run_dir, {"shape": "halves"})


@partition_app.command()
def ring(run_dir: RunDir = DEFAULT_RUN_DIR) -> None:
    """Jepsen's majorities ring over the brokers."""
    partition(run_dir, {"shape": "ring"})


@partition_app.command()
def bridge(run_dir: RunDir = DEFAULT_RUN_DIR) -> None:
    """Two halves of the brokers joined only through one bridge broker."""
    partition(run_dir, {"shape": "bridge"})


@partition_app.command()
def grudge(file: Annotated[Path, typer.Argument(metavar="FILE",
                                                help="JSON {node: [nodes it cannot hear]}.")],
           run_dir: RunDir = DEFAULT_RUN_DIR) -> None:
    """An explicit grudge read from a JSON file."""
    partition(run_dir, {"shape": "grudge", "grudge": read_grudge(file)})


def heal(run_dir: RunDir = DEFAULT_RUN_DIR) -> None:
    """Remove every partition cut (other toxics stay)."""
    call(run_dir, {"cmd": "heal"})
    Console().print("healed")


toxic_app = typer.Typer(name="toxic", no_args_is_help=True, help="Add or remove Toxiproxy toxics.")


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
    attributes = dict(attribute(item) for item in attr or [])
    response = call(run_dir, {
        "cmd": "toxic_add", "link": link, "type": type_.value, "attributes": attributes,
        "stream": f"{stream.value}stream", "toxicity": toxicity, "name": name})
    print(response["name"])


@toxic_app.command("remove")
def toxic_remove(link: LinkArg, name: Annotated[str, typer.Argument(metavar="NAME")],
                 run_dir: RunDir = DEFAULT_RUN_DIR) -> None:
    """Remove a toxic from one link."""
    call(run_dir, {"cmd": "toxic_remove", "link": link, "name": name})
    Console().print(f"removed {escape(shown(name))} from "
                    f"{escape(shown(link))}", highlight=False)


_PROCESS_FAULTS = {
    "kill": ("SIGKILL the node (a crash).", "killed"),
    "pause": ("SIGSTOP the node: it hangs with its connections open.", "paused"),
    "resume": ("SIGCONT a paused node.", "resumed"),
    "stop": ("SIGTERM: graceful stop (controlled shutdown for a broker).", "stopped"),
    "restart": ("Stop the node if running, start it again; returns when it serves.", "restarted"),
}


def _register_process_fault(app: typer.Typer, action: str, help_text: str, done: str) -> None:
    def command(node: NodeArg, run_dir: RunDir = DEFAULT_RUN_DIR) -> None:
        response = call(run_dir, {"cmd": action, "node": node})
        Console().print(f"{done} {escape(resolved(node, response))}", highlight=False)

    app.command(name=action, help=help_text)(command)


disk_app = typer.Typer(name="disk", no_args_is_help=True,
                       help="Disk faults on a broker's log dir (a cluster started with --disk).")


@disk_app.command("full")
def disk_full(node: NodeArg, run_dir: RunDir = DEFAULT_RUN_DIR) -> None:
    """Fill the broker's disk to the last byte: its writes fail with ENOSPC."""
    disk(run_dir, DiskFault.FULL, node)


@disk_app.command("errors")
def disk_errors(node: NodeArg, rate: Annotated[float, typer.Option(
        min=0.0, max=1.0, help="Share of reads and writes that fail.")] = 0.5,
                run_dir: RunDir = DEFAULT_RUN_DIR) -> None:
    """Reads and writes under the broker's log dir fail with EIO at RATE (needs --disk faulty)."""
    disk(run_dir, DiskFault.ERRORS, node, rate)


@disk_app.command("heal")
def disk_heal(node: NodeArg, run_dir: RunDir = DEFAULT_RUN_DIR) -> None:
    """Free the disk, stop the errors, and start the broker again if it halted."""
    disk(run_dir, DiskFault.HEAL, node)


def lose_unflushed_command(node: NodeArg, run_dir: RunDir = DEFAULT_RUN_DIR,
                           json_output: JsonFlag = False) -> None:
    """SIGKILL a broker, cut its logs back to the last recorded fsync point, restart it."""
    lose_unflushed(run_dir, node, json_output)


# --- what the commands send and show --------------------------------------------------------

def partition(run_dir: Path, request: dict[str, Any]) -> None:
    response = call(run_dir, {"cmd": "partition", **request})
    cut = response["cut"]
    isolated = (f" (isolated {resolved(request['node'], response)})" if "node" in request
                else "")
    Console().print(f"partitioned{escape(isolated)}: {len(cut)} directed node pairs cut: "
                    + escape(shown_pairs(cut)), highlight=False)


def resolved(asked: str, response: dict[str, Any]) -> str:
    """The node a fault went on, and the role it was asked by if one was named:
    ``broker-2 (controller)``."""
    node = str(response.get("node", asked))
    return shown(node) if node == asked else f"{shown(node)} ({asked})"


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
    node = resolved(node, response)
    if not response["partitions"]:
        Console().print(f"{escape(node)} restarted; it had no partition logs to cut",
                        highlight=False)
        return
    table = Table(title=f"{escape(node)}: unflushed data lost "
                        f"({response['offsets_lost']} offsets)")
    for column in ("partition", "recovery point", "log end before", "after", "bytes cut"):
        table.add_column(column)
    for name, cut in response["partitions"].items():
        table.add_row(name, str(cut["recovery_point"]), str(cut["log_end_before"]),
                      str(cut["log_end_after"]), str(cut["bytes_cut"]))
    Console().print(table)


def disk(run_dir: Path, fault: DiskFault, node: str, rate: float | None = None) -> None:
    """`kafka-harness disk full|errors|heal NODE`: prints what the supervisor did."""
    request: dict[str, Any] = {"cmd": "disk", "fault": fault.value, "node": node}
    if rate is not None:
        request["rate"] = rate
    response = call(run_dir, request)
    Console().print(escape(str(response["done"])), highlight=False)
