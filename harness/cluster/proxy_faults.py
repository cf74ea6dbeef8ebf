"""Network faults on a :class:`ProxiedCluster`: partitions of any shape and Toxiproxy toxics.

Partitions are grudges (:mod:`harness.net.grudge`): ``{receiver: senders it cannot hear}``.
Directed traffic ``S -> R`` is cut through the proxies by a ``timeout`` toxic with timeout 0 —
bytes are held, never delivered, and nothing is reset, which is what a dropped packet looks
like to both ends (Jepsen's "drop"): on proxy ``S->R`` (connections S opens) on its upstream
stream, and on proxy ``R->S`` (connections R opens) on its downstream stream. A pair with no
link between them (``client`` and ``zk``) carries no traffic, so there is nothing to cut.

A link may have more than one channel, each its own proxy (a KRaft node's Raft traffic, see
:mod:`harness.cluster.proxied`): a cut of a link cuts every channel of it, and a toxic added to a
link goes on every channel, unless one channel is named whole.

Partition toxics are named ``partition_upstream`` / ``partition_downstream`` (a proxy cut both
ways carries one on each stream, and toxic names are unique per proxy); every other toxic is the
caller's. The server is the source of truth: :meth:`NetworkFaults.active` and
:meth:`NetworkFaults.heal` read the proxies' toxics back from it, so a fault survives, and is
reported and healed correctly, whichever object applied it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

from toxiproxy.exceptions import InvalidToxic, ProxyExists
from toxiproxy.proxy import Proxy

from harness.cluster.proxied import CLIENT, ZOOKEEPER, ProxiedCluster, link_name, link_of
from harness.net import grudge as shapes
from harness.net.api_error import ApiError
from harness.net.partition_shapes import PartitionShapes
from harness.net.toxics import toxic_from_json

PARTITION = "partition"
STREAMS = ("upstream", "downstream")
MECHANISMS = ("proxies",)
CUT_TOXIC = {"type": "timeout", "attributes": {"timeout": 0}, "toxicity": 1.0}
"""The toxic that drops one stream of a link (named by :func:`partition_toxic_name`)."""
_PARALLEL_REQUESTS = 8


def partition_toxic_name(stream: str) -> str:
    return f"{PARTITION}_{stream}"


def is_partition_toxic(name: str) -> bool:
    return name in {partition_toxic_name(stream) for stream in STREAMS}


def cut_streams(pairs: Iterable[tuple[str, str]], links: Iterable[str]) -> list[tuple[str, str]]:
    """The (proxy, stream) pairs that drop the directed traffic ``(sender, receiver)`` in
    ``pairs``: on every channel of the links between the two.

    >>> cut_streams([("a", "b")], ["a->b", "b->a", "a->c", "a->b:controller"])
    [('a->b', 'upstream'), ('a->b:controller', 'upstream'), ('b->a', 'downstream')]
    """
    by_link: dict[str, list[str]] = {}
    for proxy in links:
        by_link.setdefault(link_of(proxy), []).append(proxy)
    cuts: set[tuple[str, str]] = set()
    for sender, receiver in pairs:
        cuts.update((proxy, "upstream") for proxy in by_link.get(link_name(sender, receiver), ()))
        cuts.update((proxy, "downstream")
                    for proxy in by_link.get(link_name(receiver, sender), ()))
    return sorted(cuts)


def pairs_from_toxics(toxics: Mapping[str, Iterable[str]]) -> list[tuple[str, str]]:
    """The directed pairs that partition toxics found on links cut (inverse of
    :func:`cut_streams`).

    >>> pairs_from_toxics({"a->b": ["partition_upstream"], "b->a": ["partition_downstream"]})
    [('a', 'b')]
    """
    pairs: set[tuple[str, str]] = set()
    for proxy, names in toxics.items():
        source, _, destination = link_of(proxy).partition("->")
        for name in names:
            if name == partition_toxic_name("upstream"):
                pairs.add((source, destination))
            elif name == partition_toxic_name("downstream"):
                pairs.add((destination, source))
    return sorted(pairs)


class NetworkFaults(PartitionShapes):
    """Partitions and toxics on every link of one :class:`ProxiedCluster`.

    Partition shapes other than :meth:`isolate` and :meth:`partition` are computed over the
    brokers by default (ZooKeeper and the client keep hearing everyone, as in Jepsen's Kafka
    test where clients and coordination sit outside the shape); pass ``nodes`` to shape others.
    Bad input — an unknown node, link or stream, or a toxic the server refuses — raises
    :class:`ValueError` naming what is allowed.
    """

    offers_toxics = True  # KernelFaults' counterpart is False

    def __init__(self, cluster: ProxiedCluster, mechanism: str = "proxies") -> None:
        if mechanism not in MECHANISMS:
            raise ValueError(f"mechanism must be one of {list(MECHANISMS)}, got {mechanism!r}")
        self.cluster = cluster
        self.mechanism = mechanism

    @property
    def nodes(self) -> list[str]:
        return self.cluster.nodes

    @property
    def brokers(self) -> list[str]:
        return [node for node in self.nodes if node not in (ZOOKEEPER, CLIENT)]

    # --- partitions --------------------------------------------------------------------------

    def partition(self, grudge: Mapping[str, Iterable[str]]) -> list[tuple[str, str]]:
        """Heal, then drop the traffic ``grudge`` names; returns the directed (sender, receiver)
        pairs cut. Node names are checked before anything changes."""
        checked = shapes.from_explicit(grudge, self.nodes)
        pairs = shapes.links_to_cut(checked)
        self.heal()
        _each([partial(self._proxy(proxy).add_toxic, name=partition_toxic_name(stream),
                       stream=stream, **CUT_TOXIC)
               for proxy, stream in cut_streams(pairs, self.cluster.links)])
        return pairs

    def heal(self) -> None:
        """Remove every partition cut; other toxics stay."""
        _each([partial(self._proxy(proxy).destroy_toxic, name)
               for proxy, names in self._toxic_names().items()
               for name in names if is_partition_toxic(name)])

    # --- toxics ------------------------------------------------------------------------------

    def add_toxic(self, link: str, type: str, attributes: dict[str, Any], *,  # noqa: A002
                  stream: str = "downstream", toxicity: float = 1.0,
                  name: str | None = None) -> str:
        """Add a Toxiproxy toxic to one link; returns its name (Toxiproxy's default
        ``<type>_<stream>`` when none is given).

        The toxic is checked here first, with the built-in server's rules, because the real
        Toxiproxy accepts what it cannot use: a misspelt attribute (``latncy``) is silently
        ignored, a fault then changes nothing and a chaos test passes for the wrong reason,
        and a slicer with ``average_size`` 0 crashes the whole server on the first byte."""
        proxies = self._proxies(link)
        if stream not in STREAMS:
            raise ValueError(f"stream must be one of {list(STREAMS)}, got {stream!r}")
        if not 0.0 <= toxicity <= 1.0:
            raise ValueError(f"toxicity must be within 0.0..1.0, got {toxicity}")
        toxic_name = name or f"{type}_{stream}"
        if is_partition_toxic(toxic_name):
            raise ValueError(f"toxic name {toxic_name!r} is reserved for partitions")
        try:
            toxic_from_json({"type": type, "stream": stream, "toxicity": toxicity,
                             "name": toxic_name, "attributes": dict(attributes)})
        except ApiError as exc:
            raise ValueError(f"invalid toxic {toxic_name!r} for {link}: {exc.message}") from None
        try:
            _each([partial(proxy.add_toxic, type=type, attributes=dict(attributes),
                           stream=stream, toxicity=toxicity, name=toxic_name)
                   for proxy in proxies])
        except (InvalidToxic, ProxyExists) as exc:
            raise ValueError(f"Toxiproxy refused toxic {toxic_name!r} on {link}: "
                             f"{_server_message(exc)}") from exc
        return toxic_name

    def remove_toxic(self, link: str, name: str) -> None:
        """Remove toxic ``name`` from every channel of ``link`` that has it."""
        proxies = self.cluster.proxies_of(link)
        names = self._toxic_names()
        holding = [proxy for proxy in proxies if name in names.get(proxy, [])]
        if not holding:
            raise ValueError(f"no toxic {name!r} on {link}; it has "
                             f"{sorted({n for p in proxies for n in names.get(p, [])})}")
        _each([partial(self._proxy(proxy).destroy_toxic, name) for proxy in holding])

    def clear(self) -> None:
        """Heal and remove every toxic on every link, and enable any proxy that was disabled."""
        self.cluster.lift_all_faults()

    def active(self) -> dict[str, Any]:
        """``{"partition": [[sender, receiver], ...], "toxics": {link: [names]}}`` as the
        server holds them; ``toxics`` lists the non-partition toxics of links that have any."""
        names = self._toxic_names()
        others = {link: [n for n in found if not is_partition_toxic(n)]
                  for link, found in names.items()}
        return {
            "partition": [list(pair) for pair in pairs_from_toxics(names)],
            "toxics": {link: found for link, found in others.items() if found},
        }

    # --- plumbing ----------------------------------------------------------------------------

    def _proxy(self, proxy: str) -> Proxy:
        """One proxy by its whole name (a link, or a channel of one)."""
        self.cluster.api()  # the client's server address is class state: point it at ours
        return self.cluster.proxies[proxy]

    def _proxies(self, name: str) -> list[Proxy]:
        """The proxies of a link (every channel), or of one channel named whole."""
        proxies = [self.cluster.proxies[proxy] for proxy in self.cluster.proxies_of(name)]
        self.cluster.api()  # the client's server address is class state: point it at ours
        return proxies

    def _toxic_names(self) -> dict[str, list[str]]:
        """Link -> the names of its toxics, for every link of the cluster, in one request."""
        return {link: [toxic["name"] for toxic in state.get("toxics") or []]
                for link, state in self.cluster.proxy_states().items()}


def _each(calls: Sequence[Callable[[], object]]) -> None:
    """Run the API calls concurrently — each waits on a round trip, and a partition is only as
    sudden as its slowest toxic — and raise the first error once all have finished."""
    if len(calls) <= 1:
        for call in calls:
            call()
        return
    with ThreadPoolExecutor(max_workers=min(len(calls), _PARALLEL_REQUESTS)) as pool:
        futures = [pool.submit(call) for call in calls]
    for future in futures:
        future.result()


def _server_message(exc: Exception) -> str:
    detail = exc.args[0] if exc.args else exc
    return detail.decode(errors="replace").strip() if isinstance(detail, bytes) else str(detail)
