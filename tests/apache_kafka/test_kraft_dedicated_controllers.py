"""Apache Kafka 4.x in Kafka's production layout: three brokers and three dedicated controllers
(``--controllers 3``), every link behind the real Toxiproxy — broker to broker, broker to
controller and controller to controller.

What is asserted is Kafka's own behaviour as the quorum reports it: the controllers are the
voters and the brokers observe them; an isolated or killed active controller is replaced by
another controller at a higher epoch while the brokers go on serving; a broker cut from the
quorum, though its clients still reach it, is fenced once its heartbeats stop, and registers
again after the heal.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from harness.cluster.kraft_state import Quorum
from harness.cluster.nodes import ClusterNodes
from harness.cluster.proxied import CONTROLLER_CHANNEL, ProxiedCluster, link_name
from harness.cluster.targets import Target, start_target
from harness.nemesis import process, roles

from .quorum import WAIT_S, brokers_seen_by, describe_quorum, reset_whole
from .records import produce, read_all

BROKERS, CONTROLLERS = [1, 2, 3], [4, 5, 6]


@pytest.fixture(scope="module")
def dedicated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    target = start_target("apache-kafka-kraft", brokers=3, controllers=3,
                          run_dir=tmp_path_factory.mktemp("kraft-dedicated"),
                          properties={"group.initial.rebalance.delay.ms": 0})
    try:
        yield target
    finally:
        target.close()


@pytest.fixture
def cluster(dedicated: Target) -> Iterator[Target]:
    """The module's cluster, healed and whole again after each test."""
    yield dedicated
    reset_whole(dedicated)


def _leading(nodes: ClusterNodes, old: int, epoch: int) -> Quorum | None:
    """The quorum once a controller other than ``old`` leads at an epoch above ``epoch``."""
    try:
        quorum = describe_quorum(nodes)
    except ConnectionError:
        return None
    return quorum if quorum.leader_id not in (None, old) and quorum.leader_epoch > epoch else None


def _observers_reached(nodes: ClusterNodes, offset: int) -> bool:
    """Whether every broker's metadata log end offset, as the leader hears it, is at
    ``offset`` or beyond."""
    offsets = describe_quorum(nodes).log_end_offsets
    return all(offsets.get(broker, -1) >= offset for broker in BROKERS)


def _create(target: Target, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": target.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})])[topic] \
        .result(60)
    nodes = target.require_nodes()
    nodes.wait_for(lambda: len((nodes.partition_state(topic, 0) or {"isr": []})["isr"]) == 3,
                   WAIT_S, f"{topic}'s ISR to hold all three brokers")


def test_the_controllers_are_the_voters_and_the_brokers_observe_them(cluster: Target) -> None:
    """process.roles split as Kafka's production layout: only controllers vote, only brokers
    register and serve clients; each node reaches each controller through the proxy of its
    own pair, and nothing dials a broker but brokers and clients."""
    nodes = cluster.require_nodes()
    quorum = describe_quorum(nodes)
    assert [v.node_id for v in quorum.voters] == CONTROLLERS
    assert quorum.leader_id in CONTROLLERS
    assert list(quorum.observers) == BROKERS
    assert nodes.registered_broker_ids() == BROKERS
    assert roles.resolve(nodes, "controller") == f"controller-{quorum.leader_id}"
    proxied = cluster.cluster
    assert isinstance(proxied, ProxiedCluster)
    names = [f"broker-{b}" for b in BROKERS] + [f"controller-{c}" for c in CONTROLLERS]
    expected = {link_name("client", f"broker-{b}") for b in BROKERS} | {
        link_name(source, destination) for source in names for destination in names
        if source != destination and not (source.startswith("controller")
                                          and destination.startswith("broker"))}
    assert set(proxied.link_names()) == expected
    assert not any(name.endswith(f":{CONTROLLER_CHANNEL}") for name in proxied.link_names())
    config = dict(line.split("=", 1) for line in (
        proxied.run_dir / "controller-4" / "server.properties").read_text().splitlines())
    assert config["process.roles"] == "controller"
    assert "CLIENT" not in config["listeners"]

    topic = "dedicated-layout"
    _create(cluster, topic)
    values = [f"v{i}".encode() for i in range(100)]
    produce(cluster.bootstrap, topic, values)
    assert read_all(cluster.bootstrap, topic, 100) == values


def test_an_isolated_active_controller_is_replaced_and_the_brokers_go_on(
        cluster: Target) -> None:
    """KIP-595 among dedicated controllers: the isolated leader loses its majority, another
    controller leads at a higher epoch, and the brokers — untouched by the cut — fetch the
    metadata log from it (their end offsets, as the new leader hears them, reach its high
    watermark) and stay registered (it hears their heartbeats)."""
    nodes = cluster.require_nodes()
    before = describe_quorum(nodes)
    old = before.leader_id
    assert old is not None
    cluster.require_faults().isolate(f"controller-{old}")
    after = nodes.wait_for(lambda: _leading(nodes, old, before.leader_epoch), WAIT_S,
                           f"a controller other than {old} to lead at a higher epoch")
    assert after.leader_id in set(CONTROLLERS) - {old}
    nodes.wait_for(lambda: _observers_reached(nodes, after.high_watermark), WAIT_S,
                   "every broker to fetch the metadata log from the new leader")
    assert nodes.registered_broker_ids() == BROKERS


def test_a_broker_cut_from_the_quorum_is_fenced_while_its_clients_still_reach_it(
        cluster: Target) -> None:
    """A broker whose heartbeats no controller hears is fenced after broker.session.timeout.ms
    and drops out of every other broker's metadata — though it runs, and its own listener,
    which clients still reach, answers from the image it last fetched. After the heal it
    registers again."""
    nodes = cluster.require_nodes()
    faults = cluster.require_faults()
    controllers = [f"controller-{c}" for c in CONTROLLERS]
    grudge = {"broker-1": controllers, **{c: ["broker-1"] for c in controllers}}
    faults.partition(grudge)
    for other in (2, 3):
        nodes.wait_for(lambda n=other: 1 not in brokers_seen_by(nodes, n), WAIT_S,
                       f"broker {other} to see broker 1 fenced")
    assert nodes.broker(1).is_running()
    assert 1 in brokers_seen_by(nodes, 1), "the cut-off broker's own image changed"
    faults.heal()
    nodes.wait_for(lambda: nodes.registered_broker_ids() == BROKERS, WAIT_S,
                   "broker 1 registered again after the heal")


def test_a_killed_active_controller_is_replaced_and_rejoins_as_a_voter(cluster: Target) -> None:
    """The ``controller`` role names the quorum's leader, a controller node: killed, another
    controller takes over; restarted, it fetches the metadata log and is a voter again with
    no lag."""
    nodes = cluster.require_nodes()
    before = describe_quorum(nodes)
    name = roles.resolve(nodes, "controller")
    assert name == f"controller-{before.leader_id}"
    killed = process.kill(nodes, name)
    assert killed["node"] == name
    old = before.leader_id
    assert old is not None
    nodes.wait_for(lambda: _leading(nodes, old, before.leader_epoch), WAIT_S,
                   f"a controller other than {old} to lead at a higher epoch")
    process.restart(nodes, name)
    nodes.wait_for(lambda: (q := describe_quorum(nodes)).leader_id is not None
                   and next(v for v in q.voters if v.node_id == old).lag == 0, WAIT_S,
                   f"{name} caught up with the quorum's leader")
    assert nodes.registered_broker_ids() == BROKERS


def test_process_faults_name_the_controllers(cluster: Target) -> None:
    """The node names process faults take include the controllers, and a wrong one is refused
    naming them; a paused controller is resumed."""
    nodes = cluster.require_nodes()
    assert process.process_nodes(nodes) == [f"broker-{b}" for b in BROKERS] + [
        f"controller-{c}" for c in CONTROLLERS]
    with pytest.raises(process.UnknownNode, match="controller-6"):
        process.pause(nodes, "controller-9")
    process.pause(nodes, "controller-5")
    assert nodes.paused == frozenset({5})
    process.resume(nodes, "controller-5")
    assert nodes.paused == frozenset()

