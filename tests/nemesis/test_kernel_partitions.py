"""Kernel partitions: nodes in network namespaces, grudges as iptables DROP rules.

Each test builds two namespaces ``a`` and ``b`` on a private bridge, runs tiny TCP echo (and
UDP) servers inside them with ``ip netns exec`` and connects across. What one-way drops do to
TCP is asserted, the way Jepsen documents it: ``{"b": {"a"}}`` drops a's packets at b, which
kills TCP handshakes in *both* directions (a's SYN, or a's SYN-ACK, never arrives), while UDP
shows the drop really is one-way.
"""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from harness.cluster.peers import ReferenceBroker
from harness.cluster.zookeeper import DEBIAN_ZOOKEEPER_JAR, ZooKeeperServer
from harness.net.netns import NetnsNetwork

T = TypeVar("T")


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "kernel partitions need root (CAP_NET_ADMIN) for ip netns and iptables"
    for tool in ("ip", "iptables", "iptables-restore"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (packages iproute2, iptables)"
    probe = f"harness-probe-{uuid.uuid4().hex[:8]}"
    result = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if result.returncode != 0:
        return f"'ip netns add' fails here: {result.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, check=False)
    return None


_REASON = _skip_reason()
pytestmark = pytest.mark.skipif(_REASON is not None, reason=_REASON or "")

PORT = 7007
CONNECT_TIMEOUT = 1.0

ECHO_SERVER = """
import socket, sys, threading
tcp = socket.create_server(("0.0.0.0", int(sys.argv[1])))
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
udp.bind(("0.0.0.0", int(sys.argv[1])))
def echo(conn):
    with conn:
        while data := conn.recv(4096):
            conn.sendall(data)
def datagrams():
    while True:
        data, peer = udp.recvfrom(4096)
        print("udp", peer[0], data.decode(), flush=True)
threading.Thread(target=datagrams, daemon=True).start()
print("ready", flush=True)
while True:
    conn, _ = tcp.accept()
    threading.Thread(target=echo, args=(conn,), daemon=True).start()
"""

TCP_CLIENT = """
import socket, sys
try:
    with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3])) as s:
        s.sendall(b"ping")
        print("echo" if s.recv(4) == b"ping" else "garbled")
except TimeoutError:
    print("timeout")
except OSError as exc:
    print(type(exc).__name__)
"""

UDP_SEND = """
import socket, sys
with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
    s.sendto(sys.argv[3].encode(), (sys.argv[1], int(sys.argv[2])))
"""


class Node:
    """A namespace running the echo server, whose UDP arrivals are read from its stdout."""

    def __init__(self, net: NetnsNetwork, name: str) -> None:
        self.net, self.name, self.ip = net, name, net.add_node(name)
        self.server = subprocess.Popen(
            net.command(name, [sys.executable, "-u", "-c", ECHO_SERVER, str(PORT)]),
            stdout=subprocess.PIPE, bufsize=0,
        )
        assert self.server.stdout is not None
        self._out = self.server.stdout.fileno()
        assert self._read(timeout=10) == ["ready"]

    def connect(self, other: Node) -> str:
        """What a TCP connect-and-echo from this node to ``other`` gives."""
        argv = [sys.executable, "-c", TCP_CLIENT, other.ip, str(PORT), str(CONNECT_TIMEOUT)]
        result = subprocess.run(self.net.command(self.name, argv), capture_output=True,
                                text=True, timeout=30, check=True)
        return result.stdout.strip()

    def send_datagram(self, other: Node, text: str) -> None:
        argv = [sys.executable, "-c", UDP_SEND, other.ip, str(PORT), text]
        subprocess.run(self.net.command(self.name, argv), check=True, timeout=30)

    def datagrams(self, wait: float = 0.5) -> list[str]:
        """The UDP arrivals the server reported within ``wait`` seconds."""
        return self._read(timeout=wait)

    def _read(self, timeout: float) -> list[str]:
        """Whole lines the server printed until ``timeout`` passes with nothing new."""
        data = b""
        while select.select([self._out], [], [], timeout)[0]:
            chunk = os.read(self._out, 4096)
            if not chunk:
                break
            data += chunk
            if data.endswith(b"\n") and data.strip() == b"ready":
                break
        return data.decode().splitlines()

    def stop(self) -> None:
        self.server.kill()
        self.server.wait(timeout=10)
        if self.server.stdout is not None:
            self.server.stdout.close()


def _leftovers(net: NetnsNetwork) -> list[str]:
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                                check=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True,
                           check=True).stdout
    return [line for line in (namespaces + links).splitlines() if net.token in line]


@pytest.fixture
def net() -> Iterator[NetnsNetwork]:
    network = NetnsNetwork("harness-test")
    try:
        yield network
    finally:
        network.close()
        assert _leftovers(network) == []


@pytest.fixture
def nodes(net: NetnsNetwork) -> Iterator[tuple[Node, Node]]:
    started: list[Node] = []
    try:
        started.append(Node(net, "a"))
        started.append(Node(net, "b"))
        yield started[0], started[1]
    finally:
        for node in started:
            node.stop()


def test_nodes_reach_each_other_before_any_partition(nodes: tuple[Node, Node]) -> None:
    a, b = nodes
    assert a.ip != b.ip
    assert a.connect(b) == "echo"
    assert b.connect(a) == "echo"


def test_one_way_drop_kills_tcp_both_ways_but_only_one_way_for_udp(
    net: NetnsNetwork, nodes: tuple[Node, Node]
) -> None:
    a, b = nodes
    assert net.partition({"b": {"a"}}) == [("a", "b")]
    assert net.rules("b") == [f"-A HARNESS-GRUDGE -s {a.ip}/32 -j DROP"]
    assert net.rules("a") == []
    # a's SYN never reaches b.
    assert a.connect(b) == "timeout"
    # b's SYN reaches a, but a's SYN-ACK is dropped at b: the handshake fails this way too.
    assert b.connect(a) == "timeout"
    # Datagrams show the drop is one-way: b -> a arrives, a -> b does not.
    b.send_datagram(a, "from-b")
    a.send_datagram(b, "from-a")
    assert a.datagrams() == [f"udp {b.ip} from-b"]
    assert b.datagrams() == []


def test_heal_restores_both_directions(net: NetnsNetwork, nodes: tuple[Node, Node]) -> None:
    a, b = nodes
    net.partition({"a": {"b"}, "b": {"a"}})
    assert a.connect(b) == "timeout"
    net.heal()
    assert net.rules("a") == net.rules("b") == []
    assert a.connect(b) == "echo"
    assert b.connect(a) == "echo"


def test_partition_replaces_the_previous_one(net: NetnsNetwork, nodes: tuple[Node, Node]) -> None:
    a, b = nodes
    net.partition({"b": {"a"}})
    net.partition({"a": {"b"}})
    assert net.rules("b") == []
    assert net.rules("a") == [f"-A HARNESS-GRUDGE -s {b.ip}/32 -j DROP"]
    b.send_datagram(a, "dropped")
    a.send_datagram(b, "arrives")
    assert b.datagrams() == [f"udp {a.ip} arrives"]
    assert a.datagrams() == []


def test_unknown_nodes_are_refused_before_any_rule_changes(
    net: NetnsNetwork, nodes: tuple[Node, Node]
) -> None:
    net.partition({"b": {"a"}})
    with pytest.raises(ValueError, match="unknown node 'c'"):
        net.partition({"a": {"b"}, "b": {"c"}})
    assert len(net.rules("b")) == 1
    assert net.rules("a") == []


def test_close_removes_everything_and_is_idempotent() -> None:
    network = NetnsNetwork("harness-test")
    try:
        network.add_node("a")
        network.add_node("b")
        # A process left running inside a namespace would keep it alive: close() kills it.
        sleeper = subprocess.Popen(network.command("a", ["sleep", "600"]))
        network.partition({"a": {"b"}})
        # the namespaces of a, b and the hub (bridge and node veths inside), the host's link
        assert len(_leftovers(network)) == 4
    finally:
        network.close()
    assert sleeper.wait(timeout=10) == -9
    assert _leftovers(network) == []
    network.close()
    with pytest.raises(RuntimeError, match="closed"):
        network.add_node("c")


def test_close_cleans_up_after_a_failed_add_node() -> None:
    with NetnsNetwork("harness-test") as network:
        network.add_node("a")
        with pytest.raises(ValueError, match="already exists"):
            network.add_node("a")
    assert _leftovers(network) == []


def test_parallel_instances_get_distinct_names_and_subnets() -> None:
    with NetnsNetwork("harness-test") as first, NetnsNetwork("harness-test") as second:
        assert first.token != second.token
        assert not first.subnet.overlaps(second.subnet)
        assert first.add_node("a") != second.add_node("a")
        assert first.namespace("a") != second.namespace("a")
    assert _leftovers(first) == _leftovers(second) == []


PRODUCE = """
import sys
from confluent_kafka import Producer
producer = Producer({"bootstrap.servers": sys.argv[1], "message.timeout.ms": 4000,
                     "socket.connection.setup.timeout.ms": 2000})
results = []
producer.produce("kernel-partitions", b"v", on_delivery=lambda err, msg: results.append(err))
remaining = producer.flush(10)
if len(results) == 1 and results[0] is None:  # KafkaError == None raises
    print("delivered")
else:
    print("failed", remaining, *(err.name() if err else "ok" for err in results))
"""


def _in_namespace(cls: type[T], net: NetnsNetwork, node: str) -> type[T]:
    """``cls`` (a :class:`ManagedProcess`) running inside ``node``'s namespace, on its IP."""

    class InNamespace(cls):  # type: ignore[valid-type,misc]
        @property
        def host(self) -> str:
            return net.ip(node)

        def _command(self) -> list[str]:
            return net.command(node, super()._command())

    return InNamespace


def test_reference_broker_in_a_namespace_serves_a_client_in_another(
    net: NetnsNetwork, tmp_path: Path
) -> None:
    if not DEBIAN_ZOOKEEPER_JAR.exists() or shutil.which("java") is None:
        pytest.skip("needs Java and the Debian zookeeper package for the broker's ZooKeeper")
    for node in ("zk", "broker", "client"):
        net.add_node(node)
    zookeeper = _in_namespace(ZooKeeperServer, net, "zk")(tmp_path / "zk", port=2181)
    broker = _in_namespace(ReferenceBroker, net, "broker")(
        tmp_path / "broker", port=9092,
        properties={"zookeeper.connect": f"{net.ip('zk')}:2181"},
    )
    with zookeeper, broker:

        def produce() -> str:
            argv = [sys.executable, "-c", PRODUCE, broker.bootstrap]
            result = subprocess.run(net.command("client", argv), capture_output=True,
                                    text=True, timeout=60, check=False)
            assert result.returncode == 0, result.stderr
            return result.stdout.strip()

        def delivered() -> bool:
            """A few tries: on a loaded machine the first send (which creates the topic) can
            outlast message.timeout.ms without any partition."""
            outcomes = []
            for _ in range(3):
                outcomes.append(produce())
                if outcomes[-1] == "delivered":
                    return True
            raise AssertionError(f"never delivered: {outcomes}")

        assert delivered()
        net.partition({"broker": {"client"}})
        assert produce() == "failed 0 _MSG_TIMED_OUT"  # connect never completes
        net.heal()
        assert delivered()
