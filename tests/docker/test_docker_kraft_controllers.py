"""Apache Kafka 4.x in Kafka's production layout on the docker backend: two brokers and three
dedicated controllers (``--controllers 3``), each in a container of its own, every
broker->controller and controller<->controller link through the Toxiproxy container.

What is asserted is Kafka's own behaviour as the quorum reports it (DescribeQuorum on the
controllers' own listeners, reached on the run's network where no fault reaches): only the
controllers vote and the brokers observe; an active controller cut off by iptables in the
containers is replaced by another controller at a higher epoch while the brokers go on serving;
a killed controller container comes back on the metadata log its volume kept, formatted once.
Kept small (5 JVMs on the run's machine): one cluster for the module.
"""

from __future__ import annotations

from collections.abc import Iterator

import docker
import pytest

from harness.cluster.docker.backend import DockerCluster
from harness.cluster.docker.faults import IptablesPartitions
from harness.cluster.docker.nodes import DATA_DIR
from harness.cluster.kraft import ApacheKafkaKraftKind
from harness.cluster.proxied import link_name
from harness.cluster.spec import ClusterSpec
from harness.supervisor.status import container_nodes

from .kafka_clients import consume, create_topic, labelled, produce, produce_and_consume
from .kafka_nodes import FORMATTED, new_leader, quorum, with_jars

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]
WAIT_S = 90
BROKERS, CONTROLLERS = [1, 2], [3, 4, 5]


@pytest.fixture(scope="module")
def kind() -> ApacheKafkaKraftKind:
    return with_jars(ApacheKafkaKraftKind())


@pytest.fixture(scope="module")
def dedicated(engine: docker.DockerClient, project_image: str, kind: ApacheKafkaKraftKind,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[DockerCluster]:
    """2 brokers and 3 controllers in containers; after the module, nothing of the run is
    left (``stop`` removes every labelled container, the network and the volumes)."""
    spec = ClusterSpec(brokers=2, controllers=3, startup_timeout=180.0,
                       properties={"replica.lag.time.max.ms": 3000,
                                   "group.initial.rebalance.delay.ms": 0})
    cluster = DockerCluster(spec, run_dir=tmp_path_factory.mktemp("docker-kraft-controllers"),
                            image=project_image, client=engine, kind=kind)
    with cluster:
        yield cluster
    assert labelled(engine, cluster.run_id) == []
    assert cluster.controllers == {} and cluster.containers == {}


def caught_up(cluster: DockerCluster) -> bool:
    """Whether a leader is known, every controller's log has reached its end, and both
    brokers are registered (unfenced)."""
    try:
        now = quorum(cluster)
        return (now.leader_id is not None and all(v.lag == 0 for v in now.voters)
                and cluster.registered_broker_ids() == BROKERS)
    except ConnectionError:
        return False


@pytest.fixture
def healthy(dedicated: DockerCluster) -> Iterator[DockerCluster]:
    """The cluster, and after the test: no partition, every node running, the quorum whole
    and caught up."""
    yield dedicated
    IptablesPartitions(dedicated).clear()
    for node_id in dedicated.spec.node_ids:
        if dedicated.broker(node_id).status() == "paused":
            dedicated.resume(node_id)
        if not dedicated.broker(node_id).is_running():
            dedicated.start_broker(node_id)
    dedicated.wait_for(lambda: caught_up(dedicated), WAIT_S, "the quorum whole and caught up")


def test_the_controllers_are_the_voters_and_the_brokers_observe_them(
        dedicated: DockerCluster, engine: docker.DockerClient, kind: ApacheKafkaKraftKind):
    """Only the controllers vote and only the brokers register; each controller is a
    container of its own on the run's network, configured with controller listeners only,
    and ``status`` lists it beside the brokers."""
    now = quorum(dedicated)
    assert [v.node_id for v in now.voters] == CONTROLLERS
    assert list(now.observers) == BROKERS
    assert now.leader_id in CONTROLLERS and dedicated.controller_id() == now.leader_id
    assert dedicated.registered_broker_ids() == BROKERS
    assert dedicated.cluster_id() == kind.cluster_id
    assert sorted(dedicated.controllers) == CONTROLLERS
    # 5 nodes and the Toxiproxy container, the network, 5 log-dir volumes.
    assert len(labelled(engine, dedicated.run_id)) == 12
    for controller in CONTROLLERS:
        node = dedicated.spec.node_name(controller)
        assert dedicated.broker(controller) is dedicated.controllers[controller]
        code, text = dedicated.containers[node].exec_run(
            ["cat", f"{DATA_DIR}/server.properties"])
        assert code == 0
        config = dict(line.split("=", 1) for line in text.decode().splitlines())
        assert config["process.roles"] == "controller"
        assert "CLIENT" not in config["listeners"] and "BROKER" not in config["listeners"]
        for source in dedicated.spec.node_ids:
            if source != controller:
                _, _, upstream = dedicated.links[link_name(dedicated.spec.node_name(source),
                                                           node)]
                assert upstream == (f"{dedicated.addresses[node]}:"
                                    f"{dedicated.ports[controller].controller[source]}")
    assert not any(name.startswith("controller-") and "->broker-" in name
                   for name in dedicated.links)
    nodes = container_nodes(dedicated, {}, lambda node, direct: direct)
    assert sorted(nodes) == ["broker-1", "broker-2", "controller-3", "controller-4",
                             "controller-5"]
    assert nodes["controller-4"]["status"] == "running" and "registered" not in nodes[
        "controller-4"]


def test_acks_all_produce_and_consume_through_the_client_proxies(dedicated: DockerCluster):
    topic = create_topic(dedicated, replication=2)
    assert produce_and_consume(dedicated, topic, 200) == [f"value-{i}".encode()
                                                          for i in range(200)]


def test_an_iptables_isolated_active_controller_is_replaced_at_a_higher_epoch(
        healthy: DockerCluster):
    """The cut drops every link to and from the active controller in the kernel — the
    brokers' and the other controllers' — so the other two elect one of themselves; the
    brokers, untouched by the cut, fetch the metadata log from the new leader (their end
    offsets, as it hears them, reach its high watermark), stay registered, and go on taking
    acks=all writes to a topic made before the cut.

    The topic is made before the cut on purpose: a broker forwards CreateTopics to the
    controller it last knew, and a request already sent on a connection whose packets are
    dropped waits out ``controller.socket.timeout.ms`` (30 s) — Kafka's behaviour, not the
    quorum's — before the broker tries the new leader."""
    cluster = healthy
    topic = create_topic(cluster, replication=2)
    before = quorum(cluster)
    old = before.leader_id
    assert old is not None
    isolated = cluster.spec.node_name(old)
    partitions = IptablesPartitions(cluster)
    partitions.isolate(isolated)
    cut = " ".join(rule for rules in partitions.rules().values() for rule in rules)
    for other in set(cluster.spec.node_ids) - {old}:
        assert link_name(cluster.spec.node_name(other), isolated) in cut, (other, cut)
        if other in CONTROLLERS:
            assert link_name(isolated, cluster.spec.node_name(other)) in cut, (other, cut)
    after = new_leader(cluster, before, WAIT_S)
    assert after.leader_id in set(CONTROLLERS) - {old}
    cluster.wait_for(lambda: all(quorum(cluster).log_end_offsets.get(b, -1)
                                 >= after.high_watermark for b in BROKERS), WAIT_S,
                     "both brokers to fetch the metadata log from the new leader")
    assert cluster.registered_broker_ids() == BROKERS
    values = [f"cut-{i}".encode() for i in range(50)]
    produce(cluster, topic, values)
    assert consume(cluster, topic, 50, group=topic) == values
    partitions.heal()
    assert partitions.rules() == {}
    cluster.wait_for(lambda: caught_up(cluster), WAIT_S, f"controller {old} back in the quorum")
    assert quorum(cluster).leader_epoch >= after.leader_epoch


def test_a_killed_controller_container_restarts_on_its_metadata_log(healthy: DockerCluster):
    """SIGKILL the active controller's container: another controller leads at a higher epoch;
    the restarted container finds ``meta.properties`` on its volume (formatted once in its
    whole log) and catches up with the quorum."""
    cluster = healthy
    before = quorum(cluster)
    old = before.leader_id
    assert old is not None
    assert cluster.kill(old) == 137
    assert not cluster.broker(old).is_running()
    assert cluster.running_broker_ids() == BROKERS  # brokers only, as on the local backend
    new_leader(cluster, before, WAIT_S)
    cluster.start_broker(old)
    assert cluster.broker(old).is_running()
    cluster.wait_for(lambda: caught_up(cluster), WAIT_S, f"controller {old} caught up again")
    log = cluster.containers[cluster.spec.node_name(old)].logs().decode(errors="replace")
    assert log.count(FORMATTED) == 1, "a restart formatted the controller's storage again"
