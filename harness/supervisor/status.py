"""What ``kafka-harness status`` shows, gathered by the supervisor: each node's process or
container, how clients reach it, the network mechanism's parts, what ZooKeeper says, and what
is degraded.

Apart from the supervisor's lifecycle (:mod:`harness.supervisor.owner`) because it is where each
backend's and each metadata source's facts are read — the part that grows with every kind of
cluster — while starting, stopping and answering requests do not.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from harness.cluster.docker.backend import DockerCluster
from harness.cluster.kraft_state import KraftState
from harness.cluster.local import LocalCluster
from harness.cluster.netns_cluster import NetnsCluster
from harness.cluster.proxied import ProxiedCluster
from harness.lifecycle.procfs import process_state
from harness.nemesis import disk as cluster_disks

_METADATA_QUERY_TIMEOUT_S = 2.0
PARTITION_FACTS = ("leader", "isr", "leader_epoch", "elr", "last_known_elr")
"""What status shows of each partition (the ELR only where KRaft has it, KIP-966)."""


def process_nodes(local: LocalCluster, zk_facts: dict[str, Any],
                  client_address: Callable[[str, str], str]) -> dict[str, dict[str, Any]]:
    """Local nodes: pid, port and state of each process."""
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
            "client_address": client_address(node, broker.bootstrap),
            "status": process_state(broker.pid),
            "registered": None if registered is None else broker_id in registered,
            "log": str(broker.log_path),
        }
        disk = cluster_disks.disks_of(local).get(broker_id)
        if disk is not None and disk.mounted:  # layer, size, free, ballast, error rate
            nodes[node]["disk"] = asdict(disk.state())
    for controller_id, controller in local.controllers.items():  # no clients, no registration
        nodes[local.spec.node_name(controller_id)] = {
            "pid": controller.pid, "port": controller.port,
            "status": process_state(controller.pid), "log": str(controller.log_path)}
    return nodes

def container_nodes(docker: DockerCluster, zk_facts: dict[str, Any],
                    client_address: Callable[[str, str], str]) -> dict[str, dict[str, Any]]:
    """Docker nodes: the container (not a pid of this host's process tree), its state as
    the engine reports it, and its address on the run's network; a dedicated controller's
    too, without the clients' address or a registration (it has neither)."""
    handles = {"zk": docker.zookeeper,
               **{f"broker-{b}": handle for b, handle in docker.brokers.items()},
               **{docker.spec.node_name(c): handle for c, handle in docker.controllers.items()}}
    registered = zk_facts.get("registered")
    nodes: dict[str, dict[str, Any]] = {}
    for node, handle in handles.items():
        if handle is None:
            continue
        status = handle.status()
        nodes[node] = {"container": handle.container_id, "name": handle.container.name,
                       "pid": None, "port": handle.port, "address": handle.bootstrap,
                       "status": status, "log": str(handle.log_path)}
        if node.startswith("broker-"):
            broker_id = int(node.removeprefix("broker-"))
            nodes[node]["client_address"] = client_address(node, handle.bootstrap)
            nodes[node]["registered"] = (None if registered is None
                                         else broker_id in registered)
    return nodes

def client_address(proxied: ProxiedCluster | DockerCluster | None, node: str, direct: str) -> str:
    """Where a client reaches ``node``: its proxy, or (kernel) the broker itself."""
    if proxied is None:
        return direct  # kernel: clients reach the broker in its namespace
    host, port, _ = proxied.links[f"client->{node}"]
    return f"{host}:{port}"

def network_facts(kernel: NetnsCluster | None, docker: DockerCluster | None,
                  proxied: ProxiedCluster | None) -> dict[str, Any]:
    """How clients reach the cluster and what the network mechanism is made of."""
    if kernel is not None:
        net = kernel.net
        return {"bootstrap": kernel.bootstrap, "direct_bootstrap": kernel.bootstrap,
                "toxiproxy_url": None, "toxiproxy_pid": None, "toxiproxy_server": None,
                "proxies": {},
                "namespaces": kernel.namespaces(), "addresses": kernel.addresses(),
                "hub": net.hub if net else None, "bridge": net.bridge if net else None,
                "host_link": net.host_link if net else None,
                "subnet": str(net.subnet) if net else None}
    if docker is not None:
            return {"bootstrap": docker.bootstrap, "direct_bootstrap": docker.direct_bootstrap,
                "toxiproxy_url": docker.toxiproxy_url, "toxiproxy_pid": None,
                "toxiproxy_server": (f"real ({docker.toxiproxy_image})"
                                     if docker.toxiproxy_image else "built-in"),
                "proxies": {name: {"listen": f"{host}:{port}", "upstream": upstream}
                            for name, (host, port, upstream) in docker.links.items()},
                "run_label": docker.label_selector, "docker_network": docker.network_name,
                "zookeeper_connect": docker.zookeeper_connect,
                "subnet": docker.subnet}
    assert proxied is not None
    return {
        "bootstrap": proxied.bootstrap,
        "direct_bootstrap": proxied.direct_bootstrap,
        "toxiproxy_url": proxied.toxiproxy_url,
        "toxiproxy_pid": proxied.server_pid,
        "toxiproxy_server": proxied.toxiproxy_server.describe(),
        "proxies": {name: {"listen": f"{host}:{port}", "upstream": upstream}
                    for name, (host, port, upstream) in proxied.links.items()},
    }


def metadata_facts(local: LocalCluster | DockerCluster) -> dict[str, Any]:
    """Registered broker ids, the controller and its epoch, each partition's leader and ISR —
    from ZooKeeper, or from a KRaft quorum (with the quorum itself: leader, epoch, each voter's
    lag) — or nothing if they do not answer in time (paused, killed, cut off): status must
    answer while the metadata's keeper is the fault."""
    facts: dict[str, Any] = {}

    def ask() -> None:
        reads = local.reads
        quorum = reads.quorum() if isinstance(reads, KraftState) else None
        facts["registered"] = reads.registered_broker_ids()
        facts["partitions"] = {
            name: {key: state[key] for key in PARTITION_FACTS if key in state}
            for name, state in reads.partition_states().items()}
        if quorum is not None:
            facts["quorum"] = quorum.to_json()
        facts["controller_epoch"] = (quorum.leader_epoch if quorum is not None
                                     else reads.controller_epoch())
        facts["controller"] = (quorum.leader_id if quorum is not None
                               else reads.controller_id())

    worker = threading.Thread(target=ask, name="status-metadata", daemon=True)
    worker.start()
    worker.join(_METADATA_QUERY_TIMEOUT_S)
    if "controller" not in facts:
        return {"metadata_unreachable": True}
    return facts


def degradations(document: dict[str, Any], zk_facts: dict[str, Any]) -> list[str]:
    """What a user should know is not healthy, one line each."""
    found = []
    for node, facts in document["nodes"].items():
        if facts["status"] != "running":
            found.append(f"{node} is {facts['status']}")
        elif facts.get("registered") is False:
            found.append(f"{node} is not registered")
    if zk_facts.get("metadata_unreachable"):
        found.append("the cluster's metadata (ZooKeeper, or the KRaft quorum) did not answer "
                     "the harness")
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
