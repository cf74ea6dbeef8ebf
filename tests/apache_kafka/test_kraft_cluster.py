"""Apache Kafka 4.x in KRaft mode as a cluster the harness runs and faults: three combined nodes
(each a broker and a voter of the controller quorum), every link behind the real Toxiproxy, the
quorum's Raft traffic included.

What is asserted is Kafka's own behaviour as the quorum reports it (DescribeQuorum on the
voters' controller listeners, Metadata on the brokers' own listeners): the active controller a
cut deposes is replaced by another voter at a higher epoch, metadata changes go on on the
majority's side and not on the minority's, and a partition whose leader is killed gets a new
one from its ISR without losing an acknowledged record.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from harness.cluster.nodes import ClusterNodes
from harness.cluster.proxied import CONTROLLER_CHANNEL, ProxiedCluster, channel_name, link_name
from harness.cluster.targets import Target, start_target
from harness.nemesis import roles
from harness.raw_client import RawClient, raw_metadata

from .quorum import WAIT_S, brokers_seen_by, describe_quorum, reset_whole
from .records import produce, read_all

FORWARDING_RECOVERY_S = 80  # a broker's request.timeout.ms (30 s) past a black-holed controller


@pytest.fixture(scope="module")
def kraft(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    target = start_target("apache-kafka-kraft", brokers=3,
                          run_dir=tmp_path_factory.mktemp("kraft"),
                          properties={"group.initial.rebalance.delay.ms": 0,
                                      "replica.lag.time.max.ms": 3000})
    try:
        yield target
    finally:
        target.close()


@pytest.fixture
def cluster(kraft: Target) -> Iterator[Target]:
    """The module's cluster, healed and whole again after each test."""
    yield kraft
    reset_whole(kraft)


def _topic(target: Target, name: str) -> str:
    admin = AdminClient({"bootstrap.servers": target.bootstrap})
    admin.create_topics([NewTopic(name, 1, 3, config={"min.insync.replicas": "2"})])[name] \
        .result(30)
    nodes = target.require_nodes()
    nodes.wait_for(lambda: len((nodes.partition_state(name, 0) or {"isr": []})["isr"]) == 3,
                   WAIT_S, f"{name}'s ISR to hold all three nodes")
    return name



def _lists_topic(nodes: ClusterNodes, node: int, topic: str) -> bool:
    """Whether node ``node``'s own metadata image has ``topic`` (asked on its own listener)."""
    broker = nodes.broker(node)
    assert broker.port is not None
    (described,) = raw_metadata(broker.host, broker.port, [topic], timeout=10).topics
    return described.error_code.value == 0


def test_three_nodes_form_one_quorum_wired_pair_by_pair(cluster: Target) -> None:
    """Every node is a voter and a registered broker; each reaches every other voter through
    the proxy of its own pair (the link's controller channel), so a cut can reach the quorum."""
    nodes = cluster.require_nodes()
    quorum = describe_quorum(nodes)
    assert [v.node_id for v in quorum.voters] == [1, 2, 3]
    assert quorum.leader_id in (1, 2, 3) and quorum.leader_epoch >= 1
    assert nodes.registered_broker_ids() == [1, 2, 3]
    assert nodes.controller_id() == quorum.leader_id
    assert cluster.version.startswith("4.")
    proxied = cluster.cluster
    assert isinstance(proxied, ProxiedCluster)
    for source in (1, 2, 3):
        config = (proxied.run_dir / f"broker-{source}" / "server.properties").read_text()
        voters = dict(line.split("=", 1) for line in config.splitlines())[
            "controller.quorum.voters"]
        for destination in {1, 2, 3} - {source}:
            channel = channel_name(link_name(f"broker-{source}", f"broker-{destination}"),
                                   CONTROLLER_CHANNEL)
            host, port, _ = proxied.links[channel]
            assert f"{destination}@{host}:{port}" in voters.split(","), (source, voters)


def test_isolating_the_active_controller_elects_another_voter_and_only_the_majority_moves_on(
        cluster: Target) -> None:
    """KIP-595: a leader that cannot reach a majority stops leading; the majority elects a new
    one at a higher epoch, fences the cut-off broker once its heartbeats stop, and keeps
    committing metadata (a new topic), which the cut-off node does not learn until it can fetch
    again."""
    nodes = cluster.require_nodes()
    faults = cluster.require_faults()
    before = describe_quorum(nodes)
    old = before.leader_id
    assert old is not None
    faults.isolate(f"broker-{old}")
    after = nodes.wait_for(lambda: q if (q := describe_quorum(nodes)).leader_id not in (None, old)
                           and q.leader_epoch > before.leader_epoch else None,
                           WAIT_S, f"a voter other than {old} to lead at a higher epoch")
    majority = sorted({1, 2, 3} - {old})
    assert after.leader_id in majority

    for node in majority:
        nodes.wait_for(lambda n=node: old not in brokers_seen_by(nodes, n), WAIT_S,
                       f"node {node} (majority side) to fence the cut-off broker {old}")
    proxied = cluster.cluster
    assert isinstance(proxied, ProxiedCluster)
    majority_clients = ",".join(
        "{}:{}".format(*proxied.links[link_name("client", f"broker-{n}")][:2]) for n in majority)
    topic = "created-while-cut"
    # A broker forwards CreateTopics to the controller it last knew until that connection
    # times out: the cut drops packets without a reset, so that takes request.timeout.ms
    # (30 s) — measured, Kafka 4.4: the creation is answered 30 s after the election.
    admin = AdminClient({"bootstrap.servers": majority_clients})
    admin.create_topics([NewTopic(topic, 1, 2)], request_timeout=FORWARDING_RECOVERY_S
                        )[topic].result(FORWARDING_RECOVERY_S + 10)
    for node in majority:
        nodes.wait_for(lambda n=node: _lists_topic(nodes, n, topic), WAIT_S,
                       f"node {node} (majority side) to list {topic}")
    assert not _lists_topic(nodes, old, topic), f"the cut-off node {old} learnt of {topic}"

    faults.heal()
    nodes.wait_for(lambda: _lists_topic(nodes, old, topic), WAIT_S,
                   f"node {old} to catch up with the quorum after the heal")


def test_killing_a_partition_leader_elects_one_from_the_isr_and_loses_nothing(
        cluster: Target) -> None:
    """With acks=all and min.insync.replicas=2, every acknowledged record was on at least two
    replicas: the controller elects a new leader from the ISR, and all of them are read."""
    nodes = cluster.require_nodes()
    topic = _topic(cluster, "leader-killed")
    first = [f"before-{i}".encode() for i in range(200)]
    produce(cluster.bootstrap, topic, first)
    state = nodes.partition_state(topic, 0)
    assert state is not None
    old = state["leader"]
    nodes.kill(old)
    moved = nodes.wait_for(
        lambda: s if (s := nodes.partition_state(topic, 0)) and s["leader"] not in (old, -1)
        else None, WAIT_S, f"a leader other than {old} for {topic}")
    assert moved["leader"] in state["isr"] and moved["leader_epoch"] > state["leader_epoch"]
    second = [f"after-{i}".encode() for i in range(200)]
    produce(cluster.bootstrap, topic, second)
    nodes.start_broker(old)
    nodes.wait_for(lambda: old in (nodes.partition_state(topic, 0) or {"isr": []})["isr"],
                   WAIT_S, f"node {old} back in {topic}'s ISR")
    assert read_all(cluster.bootstrap, topic, 400) == first + second


def test_roles_resolve_to_the_nodes_that_hold_them_on_thequorum(cluster: Target) -> None:
    """``controller`` is the quorum's active leader; ``leader:T/P`` the partition's leader;
    ``coordinator:G`` and ``txn-coordinator:ID`` the broker FindCoordinator names for the group
    and for a transactional producer's id — each read from the cluster now."""
    nodes = cluster.require_nodes()
    assert roles.resolve(nodes, "controller") == f"broker-{describe_quorum(nodes).leader_id}"
    topic = _topic(cluster, "roles")
    # Each question goes to the node furthest along the metadata log, which may not have
    # published the new topic to its image yet (seen in CI under load: None right after
    # another node showed the full ISR), so both wait for a node that lists it.
    state = nodes.wait_for(lambda: nodes.partition_state(topic, 0), WAIT_S,
                           f"{topic}/0 in the metadata image")
    leader = nodes.wait_for(lambda: roles.resolve(nodes, f"leader:{topic}/0"), WAIT_S,
                            f"a holder of leader:{topic}/0")
    assert leader == f"broker-{state['leader']}"
    group = "roles-group"
    coordinator = nodes.wait_for(
        lambda: _found(nodes, group, 0), WAIT_S, f"a coordinator for {group}")
    assert roles.resolve(nodes, f"coordinator:{group}") == f"broker-{coordinator}"
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "roles-tx"})
    producer.init_transactions(WAIT_S)  # the id now has a coordinator, and state there
    coordinator = nodes.wait_for(
        lambda: _found(nodes, "roles-tx", 1), WAIT_S, "a coordinator for roles-tx")
    assert roles.resolve(nodes, "txn-coordinator:roles-tx") == f"broker-{coordinator}"


def _found(nodes: ClusterNodes, key: str, key_type: int) -> int | None:
    """FindCoordinator (key type 0 a group, 1 a transactional id) asked of node 1 directly, as
    a client would, once it answers NONE."""
    broker = nodes.broker(1)
    assert broker.port is not None
    with RawClient(broker.host, broker.port, timeout=10) as client:
        answer = client.request(10, 3, {"key": key, "key_type": key_type})
    return int(answer.node_id) if answer.error_code == 0 else None
