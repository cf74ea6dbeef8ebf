"""Apache Kafka 4.x in KRaft mode on the docker backend: three combined nodes (each a broker and
a voter of the controller quorum) in containers, no ZooKeeper, every link through the Toxiproxy
container — the quorum's Raft traffic as its own channel ``broker-I->broker-J:controller``.

What is asserted is Kafka's own behaviour as the quorum reports it (DescribeQuorum on the
voters' own controller listeners, Metadata on their own client listeners, both reached on the
run's network where no fault reaches): a deposed active controller is replaced by another voter
at a higher epoch, whether the cut is made by iptables in the containers or by the proxies; a
killed node comes back on the metadata log its volume kept, formatted once.
"""

from __future__ import annotations

from collections.abc import Iterator

import docker
import pytest

from harness.cluster.docker.backend import DockerCluster
from harness.cluster.docker.faults import IptablesPartitions
from harness.cluster.docker.nodes import DATA_DIR
from harness.cluster.kraft import CONTAINER_LIBS, ApacheKafkaKraftKind
from harness.cluster.proxied import CONTROLLER_CHANNEL, broker_node, channel_name, link_name
from harness.cluster.proxy_faults import NetworkFaults
from harness.cluster.spec import ClusterSpec
from harness.raw_client import raw_metadata

from .kafka_clients import consume, create_topic, labelled, produce, produce_and_consume
from .kafka_nodes import FORMATTED, new_leader, quorum, with_jars

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]
WAIT_S = 60


@pytest.fixture(scope="module")
def kind() -> ApacheKafkaKraftKind:
    return with_jars(ApacheKafkaKraftKind())


@pytest.fixture(scope="module")
def kraft(engine: docker.DockerClient, project_image: str, kind: ApacheKafkaKraftKind,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[DockerCluster]:
    """Three KRaft nodes in containers; after the module, nothing of the run is left."""
    spec = ClusterSpec(brokers=3, properties={"replica.lag.time.max.ms": 3000,
                                              "group.initial.rebalance.delay.ms": 0})
    cluster = DockerCluster(spec, run_dir=tmp_path_factory.mktemp("docker-kraft"),
                            image=project_image, client=engine, kind=kind)
    with cluster:
        yield cluster
    assert labelled(engine, cluster.run_id) == []


def caught_up(cluster: DockerCluster) -> bool:
    """Whether a leader is known, every voter's log has reached its end, and every node is a
    registered (unfenced) broker again."""
    try:
        now = quorum(cluster)
        return (now.leader_id is not None and all(v.lag == 0 for v in now.voters)
                and cluster.registered_broker_ids() == [1, 2, 3])
    except ConnectionError:
        return False


@pytest.fixture
def healthy(kraft: DockerCluster) -> Iterator[DockerCluster]:
    """The cluster, and after the test: no partition in the kernels or the proxies, every node
    running, the quorum whole and caught up."""
    yield kraft
    IptablesPartitions(kraft).clear()  # the kernels' rules and the proxies' toxics
    for broker_id in kraft.spec.broker_ids:
        if kraft.broker(broker_id).status() == "paused":
            kraft.resume(broker_id)
        if not kraft.broker(broker_id).is_running():
            kraft.start_broker(broker_id)
    kraft.wait_for(lambda: caught_up(kraft), WAIT_S, "the quorum whole and caught up again")


def own_brokers(cluster: DockerCluster, node: int) -> set[int]:
    """The brokers node ``node``'s own metadata image lists, asked on its own listener."""
    broker = cluster.broker(node)
    return {b.node_id for b in raw_metadata(broker.host, broker.port, [], timeout=10).brokers}


def test_three_voters_without_zookeeper_reach_each_other_through_the_pair_channels(
        kraft: DockerCluster, engine: docker.DockerClient, kind: ApacheKafkaKraftKind):
    now = quorum(kraft)
    assert [v.node_id for v in now.voters] == [1, 2, 3]
    assert now.leader_id in (1, 2, 3) and now.leader_epoch >= 1
    assert kraft.controller_id() == now.leader_id
    assert kraft.registered_broker_ids() == [1, 2, 3]
    assert kraft.cluster_id() == kind.cluster_id  # every node formatted with the kind's id
    assert kraft.zookeeper is None and kraft.zookeeper_connect is None
    assert "zk" not in kraft.nodes and not any("zk" in link for link in kraft.links)
    # 3 nodes and the Toxiproxy container, the network, 3 log-dir volumes.
    assert len(labelled(engine, kraft.run_id)) == 8
    for source in kraft.spec.broker_ids:
        container = kraft.containers[broker_node(source)]
        code, config = container.exec_run(["cat", f"{DATA_DIR}/server.properties"])
        assert code == 0
        voters = dict(line.split("=", 1) for line in config.decode().splitlines())[
            "controller.quorum.voters"].split(",")
        for destination in set(kraft.spec.broker_ids) - {source}:
            channel = channel_name(link_name(broker_node(source), broker_node(destination)),
                                   CONTROLLER_CHANNEL)
            host, port, upstream = kraft.links[channel]
            assert f"{destination}@{host}:{port}" in voters, (source, voters)
            assert upstream == (f"{kraft.broker(destination).host}:"
                                f"{kraft.ports[destination].controller[source]}")
        code, listing = container.exec_run(["ls", CONTAINER_LIBS])
        assert code == 0 and f"kafka_2.13-{kind.version()}.jar" in listing.decode().split()


def test_acks_all_produce_and_consume_through_the_client_proxies(kraft: DockerCluster):
    topic = create_topic(kraft)
    assert produce_and_consume(kraft, topic, 200) == [f"value-{i}".encode() for i in range(200)]


def test_an_iptables_isolated_active_controller_is_replaced_at_a_higher_epoch(
        healthy: DockerCluster):
    """The cut drops the isolated node's Raft traffic (its links' controller channels) in the
    kernel: the majority elects another voter and fences the cut-off broker; the harness still
    reads the cut-off node on its own listeners, which no fault touches."""
    kraft = healthy
    before = quorum(kraft)
    old = before.leader_id
    assert old is not None
    partitions = IptablesPartitions(kraft)
    partitions.isolate(broker_node(old))
    # Each link's rules sit in the namespace of the node that opens it, on every channel.
    cut = " ".join(rule for rules in partitions.rules().values() for rule in rules)
    for other in set(kraft.spec.broker_ids) - {old}:
        for link in (link_name(broker_node(old), broker_node(other)),
                     link_name(broker_node(other), broker_node(old))):
            assert channel_name(link, CONTROLLER_CHANNEL) in cut, (link, cut)
    after = new_leader(kraft, before, WAIT_S)
    majority = sorted(set(kraft.spec.broker_ids) - {old})
    assert after.leader_id in majority
    for node in majority:
        kraft.wait_for(lambda n=node: old not in own_brokers(kraft, n), WAIT_S,
                       f"node {node} (majority side) to fence the cut-off broker {old}")
    assert old in own_brokers(kraft, old)  # its own past, read past the cut
    partitions.heal()
    assert partitions.rules() == {}
    kraft.wait_for(lambda: caught_up(kraft), WAIT_S, f"node {old} back in the quorum")
    assert quorum(kraft).leader_epoch >= after.leader_epoch


def test_a_proxy_isolated_active_controller_is_replaced_at_a_higher_epoch(
        healthy: DockerCluster):
    """The same cut made by the proxies in the Toxiproxy container (partition toxics on every
    link of the node, the controller channels included)."""
    kraft = healthy
    kraft.wait_for(lambda: caught_up(kraft), WAIT_S, "the quorum caught up")
    before = quorum(kraft)
    old = before.leader_id
    assert old is not None
    faults = NetworkFaults(kraft)
    faults.isolate(broker_node(old))
    toxics = faults.active()["partition"]
    assert [broker_node(old), broker_node(next(b for b in (1, 2, 3) if b != old))] in toxics
    after = new_leader(kraft, before, WAIT_S)
    assert after.leader_id != old
    faults.heal()
    kraft.wait_for(lambda: caught_up(kraft), WAIT_S, f"node {old} back in the quorum")


def test_a_killed_node_restarts_on_its_metadata_log(healthy: DockerCluster):
    """SIGKILL a partition's leader: another replica of the ISR leads at a higher leader
    epoch; the restarted container finds ``meta.properties`` on its volume, so it is not
    formatted again (one format in the container's whole log), registers with the quorum
    again and rejoins the ISR; every acknowledged record is read."""
    kraft = healthy
    topic = create_topic(kraft)
    first = [f"before-{i}".encode() for i in range(100)]
    produce(kraft, topic, first)
    state = kraft.partition_state(topic, 0)
    assert state is not None
    old = state["leader"]
    assert kraft.kill(old) == 137
    assert old not in kraft.running_broker_ids()
    moved = kraft.wait_for(
        lambda: s if (s := kraft.partition_state(topic, 0)) and s["leader"] not in (old, -1)
        else None, WAIT_S, f"a leader other than {old} for {topic}")
    assert moved["leader"] in state["isr"] and moved["leader_epoch"] > state["leader_epoch"]
    second = [f"after-{i}".encode() for i in range(100)]
    produce(kraft, topic, second)  # acks=all: the two replicas left are min.insync.replicas
    kraft.start_broker(old)
    assert old in kraft.registered_broker_ids()
    kraft.wait_for(lambda: old in (kraft.partition_state(topic, 0) or {"isr": []})["isr"],
                   WAIT_S, f"node {old} back in {topic}'s ISR")
    log = kraft.containers[broker_node(old)].logs().decode(errors="replace")
    assert log.count(FORMATTED) == 1, "a restart formatted the node's storage again"
    assert consume(kraft, topic, 200, group=f"{topic}-after") == first + second
