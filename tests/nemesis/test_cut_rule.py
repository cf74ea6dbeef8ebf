"""The cut rule as pure functions: which proxy stream drops which directed traffic."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from harness.cluster.proxy_faults import cut_streams, pairs_from_toxics, partition_toxic_name

NODES = ["zk", "broker-1", "broker-2", "broker-3", "client"]
LINKS = ([f"client->broker-{i}" for i in (1, 2, 3)]
         + [f"broker-{i}->broker-{j}" for i in (1, 2, 3) for j in (1, 2, 3) if i != j]
         + [f"broker-{i}->zk" for i in (1, 2, 3)])


def test_traffic_is_cut_on_the_senders_upstream_and_the_receivers_downstream():
    assert cut_streams([("broker-1", "broker-2")], LINKS) == [
        ("broker-1->broker-2", "upstream"), ("broker-2->broker-1", "downstream")]


def test_a_client_or_zookeeper_pair_is_cut_on_the_one_link_that_exists():
    assert cut_streams([("client", "broker-1")], LINKS) == [("client->broker-1", "upstream")]
    assert cut_streams([("broker-1", "client")], LINKS) == [("client->broker-1", "downstream")]
    assert cut_streams([("zk", "broker-2")], LINKS) == [("broker-2->zk", "downstream")]


def test_pairs_with_no_link_between_them_cut_nothing():
    assert cut_streams([("client", "zk"), ("zk", "client")], LINKS) == []


def test_toxic_names_say_the_stream():
    assert partition_toxic_name("upstream") == "partition_upstream"
    assert partition_toxic_name("downstream") == "partition_downstream"


linked_pairs = st.sets(st.sampled_from(
    [(a, b) for a in NODES for b in NODES if a != b and {a, b} != {"client", "zk"}]))


@given(linked_pairs)
def test_the_toxics_applied_give_back_the_pairs_cut(pairs):
    toxics: dict[str, list[str]] = {}
    for link, stream in cut_streams(pairs, LINKS):
        toxics.setdefault(link, []).append(partition_toxic_name(stream))
    assert pairs_from_toxics(toxics) == sorted(pairs)


QUORUM_LINKS = ([f"client->broker-{i}" for i in (1, 2, 3)]
                + [f"broker-{i}->broker-{j}{channel}" for i in (1, 2, 3) for j in (1, 2, 3)
                   if i != j for channel in ("", ":controller")])


def test_a_cut_between_kraft_nodes_cuts_the_quorums_channel_with_the_link():
    """A KRaft link carries replication and Raft on two proxies: a cut of the node pair must
    drop both, or the quorum would go on electing past the partition."""
    assert cut_streams([("broker-1", "broker-2")], QUORUM_LINKS) == [
        ("broker-1->broker-2", "upstream"), ("broker-1->broker-2:controller", "upstream"),
        ("broker-2->broker-1", "downstream"), ("broker-2->broker-1:controller", "downstream")]


@given(st.sets(st.sampled_from(
    [(f"broker-{a}", f"broker-{b}") for a in (1, 2, 3) for b in (1, 2, 3) if a != b]
    + [("client", f"broker-{a}") for a in (1, 2, 3)]
    + [(f"broker-{a}", "client") for a in (1, 2, 3)])))
def test_the_pairs_read_back_from_channel_toxics_are_the_pairs_cut(pairs):
    toxics: dict[str, list[str]] = {}
    for link, stream in cut_streams(pairs, QUORUM_LINKS):
        toxics.setdefault(link, []).append(partition_toxic_name(stream))
    assert pairs_from_toxics(toxics) == sorted(pairs)
