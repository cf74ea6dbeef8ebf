"""The docker backend's links and wiring, computed without an engine: the same proxy names as
the local backend's, and a KRaft node wired to its quorum through the pair-exact channels — or,
with dedicated controllers, through the pair-exact links to them."""

from __future__ import annotations

from harness.cluster.apache_kafka import ApacheKafkaKind
from harness.cluster.docker.links import BROKER_PROXY_PORT, node_wiring, wanted_proxies
from harness.cluster.kinds import ProcessRole, fixed_ports
from harness.cluster.kraft import ApacheKafkaKraftKind
from harness.cluster.options import check_options
from harness.cluster.proxied import ZOOKEEPER, broker_node
from harness.cluster.spec import ClusterSpec

IDS = [1, 2, 3]
ADDRESSES = {"toxiproxy": "10.0.0.10", ZOOKEEPER: "10.0.0.11",
             **{broker_node(b): f"10.0.0.{11 + b}" for b in IDS}}


def listen(proxy: str) -> str:
    """Where a test pretends each proxy listens: its name, so the wiring shows which it is."""
    return f"[{proxy}]"


def test_fixed_ports_give_a_quorum_node_a_controller_listener_per_source_apart_from_the_rest():
    ports = fixed_ports(ApacheKafkaKraftKind(), IDS, 9092)
    for mine in ports.values():
        assert mine.client == 9092
        assert dict(mine.inbound) == {1: 9093, 2: 9094, 3: 9095}
        assert dict(mine.controller) == {1: 9096, 2: 9097, 3: 9098}
    assert all(not p.controller for p in fixed_ports(ApacheKafkaKind(), IDS, 9092).values())


def test_a_kraft_run_has_the_quorum_channels_and_no_zookeeper_link():
    kind = ApacheKafkaKraftKind()
    ports = fixed_ports(kind, IDS, 9092)
    proxies = wanted_proxies(kind, IDS, ports, ADDRESSES, 2181)
    names = list(proxies)
    assert names[:3] == ["client->broker-1", "client->broker-2", "client->broker-3"]
    assert not any(ZOOKEEPER in name for name in names)
    channels = [name for name in names if name.endswith(":controller")]
    assert len(channels) == 6 and names[-6:] == channels  # after the links, as ProxiedCluster
    # The destination's controller listener for that source: the pair's proxy is its way in.
    assert proxies["broker-1->broker-3:controller"][1] == "10.0.0.14:9096"
    assert proxies["broker-3->broker-1"][1] == "10.0.0.12:9095"
    broker_ports = sorted(port for name, (port, _) in proxies.items()
                          if not name.startswith("client->"))
    assert broker_ports == list(range(BROKER_PROXY_PORT, BROKER_PROXY_PORT + 12))


def test_a_zookeeper_run_keeps_its_links_and_gets_no_channels():
    kind = ApacheKafkaKind()
    proxies = wanted_proxies(kind, IDS, fixed_ports(kind, IDS, 9092), ADDRESSES, 2181)
    assert proxies["broker-2->zk"][1] == "10.0.0.11:2181"
    assert not any(name.endswith(":controller") for name in proxies)
    assert len(proxies) == 3 + 6 + 3


def test_a_kraft_node_reaches_every_other_voter_through_the_pair_and_itself_directly():
    kind = ApacheKafkaKraftKind()
    wiring = node_wiring(kind, 2, IDS, fixed_ports(kind, IDS, 9092), ADDRESSES, listen)
    assert wiring.voters == {1: "[broker-2->broker-1:controller]", 2: "10.0.0.13:9097",
                             3: "[broker-2->broker-3:controller]"}
    assert wiring.voters_dial_me == {1: "[broker-1->broker-2:controller]", 2: "10.0.0.13:9097",
                                     3: "[broker-3->broker-2:controller]"}
    assert wiring.zookeeper_connect == ""
    properties = kind.wiring_properties(wiring)
    assert properties["controller.quorum.voters"] == (
        "1@[broker-2->broker-1:controller],2@10.0.0.13:9097,3@[broker-2->broker-3:controller]")
    assert str(properties["controller.listener.names"]).startswith("CONTROLLER2,")


def test_the_docker_backend_takes_a_kraft_target():
    check_options("apache-kafka-kraft", None, 3, "proxy", "docker")
    check_options("apache-kafka-kraft", None, 2, "proxy", "docker", controllers=3)


# Kafka's production layout: 2 brokers, 3 dedicated controllers (ids 3, 4, 5).
DEDICATED = ClusterSpec(brokers=2, controllers=3)
DEDICATED_ADDRESSES = {"toxiproxy": "10.0.0.10",
                       **{DEDICATED.node_name(n): f"10.0.0.{20 + n}" for n in DEDICATED.node_ids}}


def _dedicated_ports():
    return fixed_ports(ApacheKafkaKraftKind(), DEDICATED.broker_ids, 9092,
                       controller_ids=DEDICATED.controller_ids)


def test_fixed_ports_give_a_dedicated_controller_only_controller_listeners_one_per_node():
    ports = _dedicated_ports()
    for broker in DEDICATED.broker_ids:
        assert ports[broker].roles == {ProcessRole.BROKER}
        assert ports[broker].client == 9092 and dict(ports[broker].inbound) == {1: 9093, 2: 9094}
    for controller in DEDICATED.controller_ids:
        mine = ports[controller]
        assert mine.roles == {ProcessRole.CONTROLLER} and not mine.inbound
        assert dict(mine.controller) == {n: 9094 + n for n in DEDICATED.node_ids}
        assert mine.client == mine.controller[controller]  # the one the harness asks


def test_a_dedicated_run_has_a_link_from_every_node_to_every_other_controller_and_none_back():
    kind = ApacheKafkaKraftKind()
    proxies = wanted_proxies(kind, DEDICATED.broker_ids, _dedicated_ports(),
                             DEDICATED_ADDRESSES, 2181, controller_ids=DEDICATED.controller_ids)
    names = list(proxies)
    assert names[:4] == ["client->broker-1", "client->broker-2", "broker-1->broker-2",
                         "broker-2->broker-1"]
    quorum = names[4:]
    # ProxiedCluster's order: every node (brokers first), every other voter.
    assert quorum == [f"{DEDICATED.node_name(s)}->controller-{d}" for s in DEDICATED.node_ids
                      for d in DEDICATED.controller_ids if s != d]
    assert len(quorum) == 2 * 3 + 3 * 2
    assert not any(":controller" in name or "->broker-" in name for name in quorum)
    assert proxies["broker-1->controller-4"][1] == "10.0.0.24:9095"
    assert proxies["controller-5->controller-3"][1] == "10.0.0.23:9099"
    ports = sorted(port for name, (port, _) in proxies.items() if not name.startswith("client->"))
    assert ports == list(range(BROKER_PROXY_PORT, BROKER_PROXY_PORT + 14))


def test_a_dedicated_controller_is_wired_to_the_voters_only_and_a_broker_dials_them():
    kind = ApacheKafkaKraftKind()
    ports = _dedicated_ports()
    controller = node_wiring(kind, 4, DEDICATED.broker_ids, ports, DEDICATED_ADDRESSES, listen,
                             controller_ids=DEDICATED.controller_ids)
    assert controller.host == "10.0.0.24" and controller.advertised_client == ""
    assert controller.dial == {} and controller.dialled_at == {}
    assert controller.voters == {3: "[controller-4->controller-3]", 4: "10.0.0.24:9098",
                                 5: "[controller-4->controller-5]"}
    assert controller.voters_dial_me == {1: "[broker-1->controller-4]",
                                         2: "[broker-2->controller-4]",
                                         3: "[controller-3->controller-4]", 4: "10.0.0.24:9098",
                                         5: "[controller-5->controller-4]"}
    properties = kind.wiring_properties(controller)
    assert properties["process.roles"] == ProcessRole.CONTROLLER
    assert "CLIENT" not in str(properties["listeners"])
    broker = node_wiring(kind, 1, DEDICATED.broker_ids, ports, DEDICATED_ADDRESSES, listen,
                         controller_ids=DEDICATED.controller_ids)
    assert broker.advertised_client == "[client->broker-1]"
    assert broker.dial == {1: "10.0.0.21:9093", 2: "[broker-1->broker-2]"}
    assert broker.voters == {c: f"[broker-1->controller-{c}]" for c in (3, 4, 5)}
    assert broker.voters_dial_me == {}
    properties = kind.wiring_properties(broker)
    assert properties["process.roles"] == ProcessRole.BROKER
    assert properties["controller.quorum.voters"] == ",".join(
        f"{c}@[broker-1->controller-{c}]" for c in (3, 4, 5))
