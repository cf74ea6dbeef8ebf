"""Partition shapes: worked examples, input checks, and properties over any node list."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.net.grudge import (
    bisect,
    bridge,
    complete_grudge,
    from_explicit,
    halves,
    heal,
    invert,
    isolate,
    links_to_cut,
    majorities_ring,
)

FIVE = ["n1", "n2", "n3", "n4", "n5"]

node_lists = st.lists(
    st.text(alphabet="abcdefghij0123456789-", min_size=1, max_size=8),
    min_size=3, max_size=12, unique=True,
)


def hears(grudge, node, nodes):
    """The nodes ``node`` can hear, itself included."""
    return {other for other in nodes if other not in grudge.get(node, frozenset())}


def test_heal_is_empty():
    assert heal() == {}
    assert links_to_cut(heal()) == []


def test_isolate_cuts_both_ways():
    grudge = isolate(FIVE, "n3")
    assert grudge["n3"] == {"n1", "n2", "n4", "n5"}
    assert all(grudge[node] == {"n3"} for node in FIVE if node != "n3")
    assert list(grudge) == FIVE


def test_halves_majority_first():
    assert bisect(FIVE) == (("n1", "n2", "n3"), ("n4", "n5"))
    grudge = halves(FIVE)
    assert grudge["n1"] == {"n4", "n5"}
    assert grudge["n5"] == {"n1", "n2", "n3"}


def test_bridge_example():
    grudge = bridge(FIVE)
    assert grudge["n3"] == frozenset()
    assert grudge["n1"] == grudge["n2"] == {"n4", "n5"}
    assert grudge["n4"] == grudge["n5"] == {"n1", "n2"}


def test_majorities_ring_example():
    grudge = majorities_ring(FIVE)
    assert grudge["n1"] == {"n3", "n4"}
    assert grudge["n3"] == {"n1", "n5"}
    assert grudge["n5"] == {"n2", "n3"}


def test_complete_grudge_of_three_components():
    grudge = complete_grudge([["a"], ["b", "c"], ["d"]])
    assert grudge == {"a": {"b", "c", "d"}, "b": {"a", "d"}, "c": {"a", "d"},
                      "d": {"a", "b", "c"}}


def test_links_and_invert_read_the_grudge_by_sender():
    grudge = {"b": {"a"}, "c": {"a", "b"}}
    assert links_to_cut(grudge) == [("a", "b"), ("a", "c"), ("b", "c")]
    assert invert(grudge) == {"a": {"b", "c"}, "b": {"c"}}


def test_from_explicit_fills_in_and_checks():
    grudge = from_explicit({"n2": ["n1"]}, FIVE)
    assert grudge["n2"] == {"n1"}
    assert all(grudge[node] == frozenset() for node in FIVE if node != "n2")
    assert links_to_cut(grudge) == [("n1", "n2")]


@pytest.mark.parametrize("mapping,message", [
    ({"n9": ["n1"]}, "unknown node 'n9'"),
    ({"n1": ["n9"]}, "unknown node(s) ['n9']"),
    ({"n1": ["n1"]}, "against itself"),
    ({"n1": "n2"}, "must be a list"),
])
def test_from_explicit_rejects(mapping, message):
    with pytest.raises(ValueError) as raised:
        from_explicit(mapping, FIVE)
    assert message in str(raised.value)


@pytest.mark.parametrize("call,message", [
    (lambda: isolate(FIVE, "n9"), "cannot isolate 'n9'"),
    (lambda: halves(["a"]), "at least 2"),
    (lambda: bridge(["a", "b"]), "at least 3"),
    (lambda: majorities_ring(["a", "b"]), "at least 3"),
    (lambda: halves(["a", "a", "b"]), "listed twice"),
    (lambda: complete_grudge([["a", "b"], ["b"]]), "listed twice"),
])
def test_bad_node_lists_are_refused(call, message):
    with pytest.raises(ValueError) as raised:
        call()
    assert message in str(raised.value)


@given(node_lists, st.integers(min_value=1, max_value=4))
def test_complete_grudge_is_symmetric_and_total(nodes, parts):
    components = [nodes[index::parts] for index in range(parts)]
    components = [component for component in components if component]
    grudge = complete_grudge(components)
    assert set(grudge) == set(nodes)
    for receiver, senders in grudge.items():
        assert receiver not in senders
        for sender in senders:
            assert receiver in grudge[sender]
    for component in components:
        for node in component:
            assert hears(grudge, node, nodes) == set(component)


@given(node_lists)
def test_halves_leave_a_majority_side(nodes):
    grudge = halves(nodes)
    sides = {frozenset(hears(grudge, node, nodes)) for node in nodes}
    assert len(sides) == 2
    largest = max(len(side) for side in sides)
    assert largest >= len(nodes) / 2
    assert len(hears(grudge, nodes[0], nodes)) == largest
    if len(nodes) % 2:
        assert largest > len(nodes) / 2, "with an odd count the first half is a strict majority"
    assert sum(len(side) for side in sides) == len(nodes)


@given(node_lists)
def test_isolated_node_hears_only_itself(nodes):
    node = nodes[len(nodes) // 2]
    grudge = isolate(nodes, node)
    assert hears(grudge, node, nodes) == {node}
    assert all(hears(grudge, other, nodes) == set(nodes) - {node}
               for other in nodes if other != node)


@given(node_lists)
def test_bridge_node_hears_and_is_heard_by_everyone(nodes):
    grudge = bridge(nodes)
    middle = [node for node in nodes if not grudge[node]]
    assert len(middle) == 1
    (bridge_node,) = middle
    assert all(bridge_node not in senders for senders in grudge.values())
    others = [node for node in nodes if node != bridge_node]
    assert any(grudge[node] for node in others), "the bridge shape must cut something"
    if len(nodes) % 2:
        majority = len(nodes) // 2 + 1
        assert all(len(hears(grudge, node, nodes)) >= majority for node in nodes)


@given(node_lists)
def test_majorities_ring_every_node_hears_a_distinct_majority(nodes):
    grudge = majorities_ring(nodes)
    majority = len(nodes) // 2 + 1
    heard = [frozenset(hears(grudge, node, nodes)) for node in nodes]
    assert all(node in side for node, side in zip(nodes, heard, strict=True))
    assert all(len(side) == majority for side in heard)
    if len(nodes) >= 4:
        assert len(set(heard)) == len(nodes)


@given(node_lists)
def test_shapes_are_deterministic(nodes):
    for shape in (halves, bridge, majorities_ring):
        assert shape(nodes) == shape(list(nodes))
        assert links_to_cut(shape(nodes)) == links_to_cut(shape(nodes))


@given(node_lists, st.data())
def test_links_round_trip_through_invert(nodes, data):
    mapping = {
        node: data.draw(st.sets(st.sampled_from([n for n in nodes if n != node])))
        for node in nodes
    }
    grudge = from_explicit(mapping, nodes)
    by_sender = invert(grudge)
    assert sorted((src, dst) for src, dsts in by_sender.items() for dst in dsts) \
        == links_to_cut(grudge)
    assert all(dst not in grudge or src in grudge[dst] for src, dst in links_to_cut(grudge))
