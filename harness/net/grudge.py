"""Partition shapes as pure data, the way Jepsen's nemesis describes them.

A *grudge* maps each node to the nodes it cannot hear from: ``{"b": {"a"}}`` means traffic
from ``a`` to ``b`` is dropped while ``b`` still reaches ``a``. Keeping the shapes as plain
dictionaries, computed here without touching the network, lets the same shape drive either
mechanism (Toxiproxy links or kernel packet drops) and lets tests check a shape's properties
without starting anything. Every function is deterministic: the same input list gives the same
grudge, so a seeded schedule replays exactly. Callers that want random shapes shuffle the node
list first.

Every node a shape is computed over appears as a key, with an empty set when it hears
everyone, so ``grudge.keys()`` always tells which nodes the fault was planned for.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

Grudge = dict[str, frozenset[str]]
"""Node -> the nodes it cannot hear from."""


def _checked_nodes(nodes: Sequence[str], *, at_least: int, shape: str) -> tuple[str, ...]:
    """The node list as a tuple, refusing duplicates and lists too small to have the shape.

    A shape over too few nodes would silently cut nothing; a chaos test that believes it
    partitioned the cluster when it did not is worse than one that fails to start.
    """
    ordered = tuple(nodes)
    seen: set[str] = set()
    for node in ordered:
        if not isinstance(node, str) or not node:
            raise ValueError(f"node names must be non-empty strings, got {node!r}")
        if node in seen:
            raise ValueError(f"node {node!r} is listed twice")
        seen.add(node)
    if len(ordered) < at_least:
        raise ValueError(f"{shape} needs at least {at_least} nodes, got {len(ordered)}")
    return ordered


def heal() -> Grudge:
    """The empty grudge: everyone hears everyone.

    >>> heal()
    {}
    """
    return {}


def complete_grudge(components: Iterable[Iterable[str]]) -> Grudge:
    """Each node cannot hear any node outside its own component.

    >>> g = complete_grudge([["a", "b"], ["c"]])
    >>> sorted(g["a"]), sorted(g["c"])
    (['c'], ['a', 'b'])
    """
    groups = [tuple(component) for component in components]
    everyone = _checked_nodes(
        [node for group in groups for node in group], at_least=0, shape="a grudge"
    )
    universe = frozenset(everyone)
    grudge: Grudge = {}
    for group in groups:
        outside = universe - frozenset(group)
        for node in group:
            grudge[node] = outside
    return {node: grudge[node] for node in everyone}


def isolate(nodes: Sequence[str], node: str) -> Grudge:
    """Cut ``node`` off from every other node, both ways.

    >>> g = isolate(["a", "b", "c"], "b")
    >>> sorted(g["b"]), sorted(g["a"])
    (['a', 'c'], ['b'])
    """
    ordered = _checked_nodes(nodes, at_least=2, shape="isolate")
    if node not in ordered:
        raise ValueError(f"cannot isolate {node!r}: it is not one of {list(ordered)}")
    grudge = complete_grudge([[node], [other for other in ordered if other != node]])
    return {name: grudge[name] for name in ordered}


def bisect(nodes: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Split the list in two at its middle, the larger half (a majority when n is odd) first.

    >>> bisect(["a", "b", "c", "d", "e"])
    (('a', 'b', 'c'), ('d', 'e'))
    """
    ordered = _checked_nodes(nodes, at_least=2, shape="bisect")
    middle = (len(ordered) + 1) // 2
    return ordered[:middle], ordered[middle:]


def halves(nodes: Sequence[str]) -> Grudge:
    """Two halves that cannot hear each other; the first half keeps the majority.

    >>> g = halves(["a", "b", "c", "d", "e"])
    >>> sorted(g["a"]), sorted(g["d"])
    (['d', 'e'], ['a', 'b', 'c'])
    """
    majority, minority = bisect(nodes)
    return complete_grudge([majority, minority])


def bridge(nodes: Sequence[str]) -> Grudge:
    """Two halves cut apart except for one node in the middle that hears, and is heard by, both.

    With an odd node count each side plus the bridge is a majority, which is what makes the
    shape interesting: two overlapping majorities can each elect a leader if the system trusts
    majorities too much. The bridge is the last node of the larger half.

    >>> g = bridge(["a", "b", "c", "d", "e"])
    >>> sorted(g["a"]), sorted(g["c"]), sorted(g["e"])
    (['d', 'e'], [], ['a', 'b'])
    """
    ordered = _checked_nodes(nodes, at_least=3, shape="bridge")
    majority, minority = bisect(ordered)
    middle = majority[-1]
    grudge = complete_grudge([majority[:-1], minority])
    return {node: frozenset() if node == middle else grudge[node] for node in ordered}


def majorities_ring(nodes: Sequence[str]) -> Grudge:
    """Each node hears a majority centred on itself in a ring; no two majorities are the same.

    With nodes in a circle, node ``i`` hears the ``n // 2 + 1`` nodes around it (itself
    included) and nobody else, so every node believes it is in a majority while no majority
    agrees on its members. For an even-sized window the extra node is taken on the left, so
    some cuts are one-way.

    >>> g = majorities_ring(["a", "b", "c", "d", "e"])
    >>> sorted(g["a"]), sorted(g["c"])
    (['c', 'd'], ['a', 'e'])
    """
    ordered = _checked_nodes(nodes, at_least=3, shape="majorities_ring")
    count = len(ordered)
    window = count // 2 + 1
    left = window // 2
    universe = frozenset(ordered)
    grudge: Grudge = {}
    for index, node in enumerate(ordered):
        heard = {ordered[(index + offset) % count] for offset in range(-left, window - left)}
        grudge[node] = universe - heard
    return grudge


def from_explicit(mapping: Mapping[str, Iterable[str]], nodes: Sequence[str]) -> Grudge:
    """A grudge written by hand, e.g. from a JSON file, checked against the cluster's nodes.

    ``nodes`` is the cluster's node list: a name outside it is a typo that would otherwise
    cut nothing. Nodes the mapping does not mention hear everyone.

    >>> g = from_explicit({"b": ["a"]}, ["a", "b", "c"])
    >>> g["a"], sorted(g["b"]), g["c"]
    (frozenset(), ['a'], frozenset())
    """
    ordered = _checked_nodes(nodes, at_least=1, shape="an explicit grudge")
    known = frozenset(ordered)
    grudge: Grudge = {node: frozenset() for node in ordered}
    for node, unheard in mapping.items():
        if node not in known:
            raise ValueError(f"unknown node {node!r} in grudge; nodes are {list(ordered)}")
        if isinstance(unheard, str) or not isinstance(unheard, Iterable):
            raise ValueError(f"grudge of {node!r} must be a list of node names, got {unheard!r}")
        senders = frozenset(unheard)
        unknown = sorted(str(sender) for sender in senders - known)
        if unknown:
            raise ValueError(
                f"unknown node(s) {unknown} in the grudge of {node!r}; nodes are {list(ordered)}"
            )
        if node in senders:
            raise ValueError(f"node {node!r} cannot hold a grudge against itself")
        grudge[node] = senders
    return grudge


def invert(grudge: Mapping[str, Iterable[str]]) -> Grudge:
    """Re-key a grudge by sender: node -> the nodes that must not receive its traffic.

    A proxy sits on the sender's side of a link, so applying a grudge through proxies reads it
    this way round.

    >>> g = invert({"b": {"a"}, "c": {"a", "b"}})
    >>> sorted(g["a"]), sorted(g["b"])
    (['b', 'c'], ['c'])
    """
    by_sender: dict[str, set[str]] = {}
    for source, destination in links_to_cut(grudge):
        by_sender.setdefault(source, set()).add(destination)
    return {source: frozenset(destinations) for source, destinations in by_sender.items()}


def links_to_cut(grudge: Mapping[str, Iterable[str]]) -> list[tuple[str, str]]:
    """The directed ``(source, destination)`` links a grudge cuts, sorted.

    >>> links_to_cut({"a": {"c"}, "c": {"a"}})
    [('a', 'c'), ('c', 'a')]
    """
    return sorted((sender, receiver) for receiver, senders in grudge.items() for sender in senders)
