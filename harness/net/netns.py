"""Kernel packet drops for partitions: one network namespace per node and iptables DROP rules.

This is the second partition mechanism, the one Jepsen and Trogdor use: every node runs in its
own Linux network namespace, joined to the others through a bridge, and a
grudge (see :mod:`harness.net.grudge`) becomes ``iptables -A ... -s <sender> -j DROP`` rules in
each receiver's namespace. The kernel then drops the packets, so every protocol between the
nodes is affected, not only the links a proxy stands on.

The host (the root namespace, where clients and the harness run) can take part in a grudge
under a name of the caller's choosing (``host=`` of :meth:`NetnsNetwork.partition`), without
touching the host's own firewall: packets from the host are dropped in the receiving node's
namespace (source: the host's address on the subnet, :attr:`NetnsNetwork.gateway`), packets to
the host in the sending node's namespace (destination: that address).

Drops are one-way, exactly as the grudge says: ``{"b": {"a"}}`` drops every packet from ``a``
arriving at ``b`` and nothing else. Datagrams from ``b`` still reach ``a``, but TCP needs both
directions for its handshake, so connections fail both ways: ``a``'s SYNs never arrive at
``b``, and when ``b`` connects to ``a`` it is ``a``'s SYN-ACK that is dropped. Established
connections stall the same way (their segments or their acknowledgements are dropped) until the
partition heals or the sender's retransmissions give up.

Everything an instance creates (namespaces, veth pairs, bridge) carries a random token in its
name, so parallel runs cannot collide, and :meth:`NetnsNetwork.close` removes all of it, even
after a half-finished setup. Nothing outside those objects is touched: the rules live in chains
inside the instance's own namespaces, never in the host's chains. The bridge's subnet is picked
from ``10.213.0.0/16`` under a host-wide lock (an abstract Unix socket, which leaves no file
behind and is released when its holder dies), skipping any /24 with a route or address on the
host.

The bridge lives in a namespace of its own (the *hub*, ``{prefix}-{token}.hub``), not in the
root namespace: a host that passes bridged traffic through its iptables (``br_netfilter`` with
``bridge-nf-call-iptables=1``) under a FORWARD policy of DROP — what Docker sets up — would
otherwise drop every packet between two nodes before any grudge, and that host rule is not ours
to change. In the hub, bridged packets meet the hub's own, empty FORWARD chain. The host reaches
the nodes through one veth into the hub (``hb{token}``, holding the gateway address), so its
traffic with them is its own INPUT and OUTPUT, never its FORWARD.

Needs root (``CAP_NET_ADMIN``), iproute2 and iptables.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import secrets
import signal
import socket
import subprocess
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from types import TracebackType

from harness.lifecycle import reaper
from harness.net.grudge import links_to_cut
from harness.net.netns_support import unavailable

CHAIN = "HARNESS-GRUDGE"
"""The chain, inside each node's namespace, holding the partition's DROP rules (from INPUT)."""

OUT_CHAIN = "HARNESS-GRUDGE-OUT"
"""The chain, inside each node's namespace, dropping what it sends to the host (from OUTPUT)."""

SUPERNET = ipaddress.IPv4Network("10.213.0.0/16")
"""Where the per-instance /24 subnets are picked from."""

LOCK_NAME = b"\0kafka-harness-netns-subnet"
"""Abstract socket name serialising subnet picking between instances and processes on a host."""

_MAX_NODES = 253  # .2 to .254; .1 is the host


class NetnsError(RuntimeError):
    """An ``ip`` or ``iptables`` command failed; the message carries its stderr."""


class NetnsUnavailable(NetnsError):
    """This host cannot do kernel partitions (see :func:`unavailable`)."""


def _run(argv: Sequence[str], *, stdin: str | None = None) -> str:
    result = subprocess.run(
        list(argv), input=stdin, capture_output=True, text=True, check=False, timeout=30
    )
    if result.returncode != 0:
        raise NetnsError(
            f"{' '.join(argv)} exited {result.returncode}: {result.stderr.strip()}"
        )
    return result.stdout


class NetnsNetwork:
    """Nodes in their own network namespaces on a private bridge, partitioned by iptables.

    Usage (root only)::

        with NetnsNetwork("kafka") as net:
            ip_a, ip_b = net.add_node("a"), net.add_node("b")
            server = subprocess.Popen(net.command("b", ["python", "-m", "reference_broker"]))
            net.partition({"b": {"a"}})  # drop packets from a arriving at b
            net.heal()
    """

    def __init__(self, prefix: str) -> None:
        reason = unavailable()
        if reason is not None:
            raise NetnsUnavailable(reason)
        if not prefix or not all(c.isalnum() or c in "-_" for c in prefix):
            raise ValueError(f"prefix must be non-empty letters, digits, '-' or '_': {prefix!r}")
        self.token = secrets.token_hex(3)
        self.prefix = f"{prefix}-{self.token}"
        self.hub = f"{self.prefix}.hub"  # '.' is not allowed in node names: no collision
        self.bridge = f"br{self.token}"  # in the hub; interface names are at most 15 characters
        self.host_link = f"hb{self.token}"  # the host's veth into the hub
        self._nodes: dict[str, tuple[str, str, str]] = {}  # name -> (namespace, veth, ip)
        self._namespaces: list[str] = []  # created, in order, for close(); the hub first
        self._host_link_created = False
        self._closed = False
        self._ledger: list[int] = []  # the reaper's entries, released by close()
        try:
            self.subnet = self._claim_subnet()
        except BaseException:
            self.close()
            raise

    # -- setup --------------------------------------------------------------------------------

    def _claim_subnet(self) -> ipaddress.IPv4Network:
        """Create the hub and the host's link into it, addressed in the first free /24 of
        :data:`SUPERNET` (the host's route to it is what claims it)."""
        with _host_lock():
            taken = _routed_networks()
            candidates = list(SUPERNET.subnets(new_prefix=24))
            start = secrets.randbelow(len(candidates))
            for subnet in candidates[start:] + candidates[:start]:
                if any(subnet.overlaps(net) for net in taken):
                    continue
                self._create_hub(f"{next(subnet.hosts())}/{subnet.prefixlen}")
                return subnet
        raise NetnsError(f"no free /24 left in {SUPERNET}")

    def _create_hub(self, gateway: str) -> None:
        in_hub = ["ip", "-n", self.hub]
        self._ledger.append(reaper.register(delete_namespace, self.hub))
        _run(["ip", "netns", "add", self.hub])
        self._namespaces.append(self.hub)
        _run([*in_hub, "link", "add", self.bridge, "type", "bridge"])
        _run([*in_hub, "link", "set", self.bridge, "up"])
        hub_side = f"hx{self.token}"
        self._ledger.append(reaper.register(delete_host_link, self.host_link))
        _run(["ip", "link", "add", self.host_link, "type", "veth", "peer", "name", hub_side,
              "netns", self.hub])
        self._host_link_created = True
        _run([*in_hub, "link", "set", hub_side, "master", self.bridge])
        _run([*in_hub, "link", "set", hub_side, "up"])
        _run(["ip", "addr", "add", gateway, "dev", self.host_link])
        _run(["ip", "link", "set", self.host_link, "up"])

    def add_node(self, name: str) -> str:
        """Create namespace ``{prefix}-{token}-{name}`` wired into the bridge; its IPv4 address."""
        self._check_open()
        if not name or not all(c.isalnum() or c in "-_" for c in name):
            raise ValueError(f"node names must be letters, digits, '-' or '_': {name!r}")
        if name in self._nodes:
            raise ValueError(f"node {name!r} already exists")
        index = len(self._nodes)
        if index >= _MAX_NODES:
            raise ValueError(f"at most {_MAX_NODES} nodes fit in {self.subnet}")
        namespace = f"{self.prefix}-{name}"
        hub_side, node_side = f"hv{self.token}{index}", f"hn{self.token}{index}"
        ip = str(self.subnet.network_address + 2 + index)

        self._ledger.append(reaper.register(delete_namespace, namespace))
        _run(["ip", "netns", "add", namespace])
        self._namespaces.append(namespace)
        in_hub = ["ip", "-n", self.hub]
        _run([*in_hub, "link", "add", hub_side, "type", "veth", "peer", "name", node_side,
              "netns", namespace])
        _run([*in_hub, "link", "set", hub_side, "master", self.bridge])
        _run([*in_hub, "link", "set", hub_side, "up"])
        inside = ["ip", "netns", "exec", namespace]
        _run([*inside, "ip", "link", "set", "lo", "up"])
        _run([*inside, "ip", "addr", "add", f"{ip}/{self.subnet.prefixlen}", "dev", node_side])
        _run([*inside, "ip", "link", "set", node_side, "up"])
        _run([*inside, "ip", "route", "add", "default", "via", str(self.gateway)])
        _run([*inside, "iptables", "-w", "-N", CHAIN])
        _run([*inside, "iptables", "-w", "-A", "INPUT", "-j", CHAIN])
        _run([*inside, "iptables", "-w", "-N", OUT_CHAIN])
        _run([*inside, "iptables", "-w", "-A", "OUTPUT", "-j", OUT_CHAIN])
        self._nodes[name] = (namespace, hub_side, ip)
        return ip

    # -- use ----------------------------------------------------------------------------------

    @property
    def gateway(self) -> ipaddress.IPv4Address:
        """The host's address on the nodes' subnet: the root namespace reaches every node
        through it."""
        return next(self.subnet.hosts())

    @property
    def nodes(self) -> dict[str, str]:
        """Node name -> IPv4 address."""
        return {name: ip for name, (_, _, ip) in self._nodes.items()}

    def ip(self, name: str) -> str:
        return self._node(name)[2]

    def namespace(self, name: str) -> str:
        return self._node(name)[0]

    def command(self, name: str, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside node ``name``'s namespace."""
        return ["ip", "netns", "exec", self.namespace(name), *argv]

    def partition(self, grudge: Mapping[str, Iterable[str]], *,
                  host: str | None = None) -> list[tuple[str, str]]:
        """Drop, at each receiver, packets from the senders it holds a grudge against.

        ``host`` names the root namespace in ``grudge`` (e.g. ``"client"``): its packets are
        dropped where they arrive, packets for it where they leave, both inside the nodes'
        namespaces. Replaces any previous partition; returns the directed ``(sender,
        receiver)`` links cut. Each node's rules are swapped atomically (one
        ``iptables-restore`` per node), but the nodes are updated one after another.
        """
        self._check_open()
        links = links_to_cut(grudge)
        for sender, receiver in links:
            for name in (sender, receiver):
                if name != host:
                    self._node(name)  # unknown names fail before any change
            if sender == receiver == host:
                raise ValueError(f"the host cannot hold a grudge against itself: {host!r}")
        drops: dict[str, list[str]] = {name: [] for name in self._nodes}
        to_host: dict[str, bool] = {name: False for name in self._nodes}
        for sender, receiver in links:
            if receiver == host:
                to_host[sender] = True
            else:
                drops[receiver].append(str(self.gateway) if sender == host else self.ip(sender))
        for name, sources in drops.items():
            self._replace_rules(name, sources, to_host[name])
        return links

    def heal(self) -> None:
        """Remove every DROP rule: all nodes (and the host) hear each other again."""
        self._check_open()
        for name in self._nodes:
            self._replace_rules(name, [], False)

    def rules(self, name: str) -> list[str]:
        """The partition's current rules in node ``name`` (``iptables -S`` lines)."""
        lines = []
        for chain in (CHAIN, OUT_CHAIN):
            output = _run(self.command(name, ["iptables", "-w", "-S", chain]))
            lines += [line for line in output.splitlines() if line.startswith("-A ")]
        return lines

    def _replace_rules(self, name: str, sources: Sequence[str], drop_to_host: bool) -> None:
        lines = ["*filter", f"-F {CHAIN}", f"-F {OUT_CHAIN}"]
        lines += [f"-A {CHAIN} -s {source}/32 -j DROP" for source in sources]
        if drop_to_host:
            lines.append(f"-A {OUT_CHAIN} -d {self.gateway}/32 -j DROP")
        lines.append("COMMIT")
        _run(self.command(name, ["iptables-restore", "-w", "--noflush"]),
             stdin="\n".join(lines) + "\n")

    def _node(self, name: str) -> tuple[str, str, str]:
        try:
            return self._nodes[name]
        except KeyError:
            raise ValueError(f"unknown node {name!r}; nodes are {sorted(self._nodes)}") from None

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this NetnsNetwork is closed")

    # -- teardown -----------------------------------------------------------------------------

    def close(self) -> None:
        """Kill processes left in the namespaces, then delete them (the hub last, with the
        bridge and every veth in it) and the host's link into the hub.

        Idempotent, and it carries on past failures so one stuck object does not leak the
        rest; the first failure is raised at the end.
        """
        self._closed = True
        errors: list[Exception] = []
        for namespace in reversed(self._namespaces):
            with _collect(errors):
                _kill_processes(namespace)
            with _collect(errors):
                _delete(["ip", "netns", "del", namespace])
        if self._host_link_created:  # normally gone with its peer in the hub
            with _collect(errors):
                _delete(["ip", "link", "del", self.host_link])
        self._namespaces.clear()
        self._host_link_created = False
        if not errors:
            for entry in self._ledger:
                reaper.release(entry)
            self._ledger.clear()
        if errors:
            raise errors[0]

    def __enter__(self) -> NetnsNetwork:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


@contextlib.contextmanager
def _collect(errors: list[Exception]) -> Iterator[None]:
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - cleanup must go on; the first is re-raised
        errors.append(exc)


@contextlib.contextmanager
def _host_lock(timeout: float = 60.0) -> Iterator[None]:
    """Hold the host-wide subnet lock: binding an abstract socket name only one can hold."""
    deadline = time.monotonic() + timeout
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as lock:
        while True:
            try:
                lock.bind(LOCK_NAME)
                break
            except OSError:
                if time.monotonic() > deadline:
                    message = f"timed out waiting for the subnet lock {LOCK_NAME!r}"
                    raise NetnsError(message) from None
                time.sleep(0.05)
        yield


def _routed_networks() -> list[ipaddress.IPv4Network]:
    """Every IPv4 network with a route or an address on the host, in any table."""
    networks = []
    output = _run(["ip", "-4", "route", "show", "table", "all"])
    output += _run(["ip", "-4", "-o", "addr", "show"]).replace(" inet ", "\n")
    for line in output.splitlines():
        for word in line.split()[:2]:
            with contextlib.suppress(ValueError):
                networks.append(ipaddress.IPv4Network(word, strict=False))
                break
    return networks


@reaper.undo_action
def delete_namespace(namespace: str) -> None:
    """Kill what runs in a namespace and delete it; a namespace already gone is no error (also
    the watchdog's undo of a namespace whose owner died)."""
    _kill_processes(namespace)
    _delete(["ip", "netns", "del", namespace])


@reaper.undo_action
def delete_host_link(link: str) -> None:
    """The watchdog's undo of a link in the root namespace whose owner died."""
    subprocess.run(["ip", "link", "del", link], capture_output=True, check=False, timeout=30)


def _kill_processes(namespace: str) -> None:
    """SIGKILL what still runs in a namespace this instance created: it would keep it alive."""
    result = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True,
                            text=True, check=False, timeout=30)
    for pid in result.stdout.split():
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)


def _delete(argv: Sequence[str]) -> None:
    """Run a delete command, treating "already gone" as success."""
    result = subprocess.run(list(argv), capture_output=True, text=True, check=False, timeout=30)
    if result.returncode == 0:
        return
    gone = ("No such file", "Cannot find device", "does not exist", "No such device")
    if any(marker in result.stderr for marker in gone):
        return
    raise NetnsError(f"{' '.join(argv)} exited {result.returncode}: {result.stderr.strip()}")
