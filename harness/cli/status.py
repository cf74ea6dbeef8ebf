"""`kafka-harness status`: what the supervisor says of its cluster, as tables or JSON.

Only presentation: the facts (nodes, pids, addresses, the controller, partitions, active faults,
what is degraded) are gathered by the supervisor (:mod:`harness.supervisor.status`) and arrive
as one JSON document over the control socket.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from harness.cli.control import call, shown, shown_pairs
from harness.cluster.options import Backend, Network


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
    controller = (f"; controller {node_name(state, state['controller'])} (epoch {epoch})"
                  if state.get("controller") is not None else "")
    console.print(f"brokers: {state.get('target')}{version}{controller}", highlight=False)
    if state.get("quorum"):
        console.print(_quorum_line(state), highlight=False)
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
        voters = {node_name(state, int(v)) for v in (state.get("quorum") or {}).get("voters", {})}
        role = ("controller" if state.get("controller") is not None
                and node == node_name(state, state["controller"])
                else "voter" if node in voters else "")
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
    """Leader, ISR and leader epoch of every topic partition, as the controller recorded them
    (and, on KRaft where Kafka has them, KIP-966's eligible leader replicas)."""
    kraft = bool(state.get("quorum"))
    table = Table(title="partitions (KRaft metadata)" if kraft else "partitions (ZooKeeper)")
    columns = ["partition", "leader", "isr", "leader epoch"] + (["elr"] if kraft else [])
    for column in columns:
        table.add_column(column)
    for name, facts in state["partitions"].items():
        leader = ("[red]none[/red]" if facts["leader"] < 0
                  else node_name(state, facts["leader"]))
        row = [name, leader, ",".join(map(str, facts["isr"])), str(facts["leader_epoch"])]
        if kraft:
            row.append(",".join(map(str, facts.get("elr", []))))
        table.add_row(*row)
    return table


def node_name(state: dict[str, Any], node_id: int) -> str:
    """What the status calls node ``node_id``: the name of the node with that id (a broker,
    or a dedicated controller), ``broker-<id>`` when the state lists none."""
    for node in state.get("nodes", {}):
        if node.rpartition("-")[2] == str(node_id):
            return node
    return f"broker-{node_id}"


def _quorum_line(state: dict[str, Any]) -> str:
    """``quorum: leader broker-2 (epoch 3), voters 1 (lag 0), 2 (lag 0), 3 (lag 12)``."""
    quorum = state["quorum"]
    voters = ", ".join(f"{voter} (lag {'?' if facts['lag'] is None else facts['lag']})"
                       for voter, facts in quorum["voters"].items())
    leader = node_name(state, quorum["leader"]) if quorum["leader"] is not None else "none"
    return (f"quorum: leader {leader} (epoch {quorum['epoch']}, high watermark "
            f"{quorum['high_watermark']}), voters {voters}")


def _toxiproxy_server(state: dict[str, Any]) -> str:
    """``real v2.12.0 server, `` — which Toxiproxy server runs, if the supervisor said."""
    server = state.get("toxiproxy_server")
    return f"{server} server, " if server else ""
