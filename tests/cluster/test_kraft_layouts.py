"""The two KRaft layouts as configuration, without starting anything: combined nodes (every
broker a voter) and dedicated controllers (``--controllers``, Kafka's production layout).

What each node's ``server.properties`` must say follows from Kafka's own rules: a controller
has only controller listeners and no client or broker ones; a broker of the dedicated layout
has no controller listener but names one (``controller.listener.names``), with its protocol, to
dial the voters with; every node names every voter at the address it reaches that voter at.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cluster.kinds import ProcessRole, allocate_ports, direct_wiring
from harness.cluster.kraft import ApacheKafkaKraftKind, KafkaDistribution
from harness.cluster.options import Backend, Network, check_options
from harness.cluster.reference_kind import REFERENCE
from harness.cluster.spec import ClusterSpec
from harness.net.ports import LOOPBACK

KIND = ApacheKafkaKraftKind(KafkaDistribution(Path("no-jars-needed"), "4.4.0"))


def _properties(spec: ClusterSpec) -> dict[int, dict[str, str | int]]:
    ports = allocate_ports(KIND, spec.broker_ids, controller_ids=spec.controller_ids)
    wiring = direct_wiring(ports, dict.fromkeys(spec.node_ids, LOOPBACK), "")
    return {node: KIND.wiring_properties(wiring[node]) for node in spec.node_ids}


def test_a_spec_names_its_controllers_after_its_brokers() -> None:
    spec = ClusterSpec(brokers=3, controllers=3)
    assert spec.controller_ids == spec.voter_ids == [4, 5, 6]
    assert spec.node_ids == [1, 2, 3, 4, 5, 6]
    assert [spec.node_name(n) for n in (1, 4)] == ["broker-1", "controller-4"]
    combined = ClusterSpec(brokers=3)
    assert combined.controller_ids == [] and combined.voter_ids == [1, 2, 3]
    with pytest.raises(ValueError, match="controllers must be >= 0"):
        ClusterSpec(controllers=-1)


def test_dedicated_controllers_have_only_controller_listeners() -> None:
    properties = _properties(ClusterSpec(brokers=2, controllers=3))
    for controller in (3, 4, 5):
        mine = properties[controller]
        assert mine["process.roles"] == ProcessRole.CONTROLLER
        listeners = str(mine["listeners"]).split(",")
        # One per node that dials it: both brokers and the three controllers.
        assert sorted(name.split("://")[0] for name in listeners) == [
            f"CONTROLLER{n}" for n in range(1, 6)]
        assert str(mine["controller.listener.names"]).startswith(f"CONTROLLER{controller},")
        assert "inter.broker.listener.name" not in mine
        assert str(mine["controller.quorum.voters"]).count("@") == 3


def test_dedicated_brokers_dial_the_voters_without_being_one() -> None:
    properties = _properties(ClusterSpec(brokers=2, controllers=3))
    for broker in (1, 2):
        mine = properties[broker]
        assert mine["process.roles"] == ProcessRole.BROKER
        assert "CONTROLLER" not in str(mine["listeners"])
        assert mine["controller.listener.names"] == f"CONTROLLER{broker}"
        assert f"CONTROLLER{broker}:PLAINTEXT" in str(mine["listener.security.protocol.map"])
        voters = str(mine["controller.quorum.voters"]).split(",")
        assert [voter.split("@")[0] for voter in voters] == ["3", "4", "5"]
        assert mine["inter.broker.listener.name"] == f"BROKER{broker}"


def test_combined_nodes_are_brokers_and_voters() -> None:
    properties = _properties(ClusterSpec(brokers=3))
    for node in (1, 2, 3):
        assert properties[node]["process.roles"] == "broker,controller"
        assert str(properties[node]["listeners"]).startswith("CLIENT://")


def test_only_the_kraft_target_takes_controllers_on_either_backend() -> None:
    check_options("apache-kafka-kraft", None, 3, controllers=3)
    check_options("apache-kafka-kraft", None, 3, Network.PROXY, Backend.DOCKER, controllers=3)
    for target in ("reference", "apache-kafka"):
        for backend in Backend:
            with pytest.raises(ValueError, match="for the apache-kafka-kraft target"):
                check_options(target, None, 3, Network.PROXY, backend, controllers=3)
    with pytest.raises(ValueError, match="--network kernel runs the ZooKeeper-mode"):
        check_options("apache-kafka-kraft", None, 3, Network.KERNEL, Backend.LOCAL,
                      controllers=3)
    with pytest.raises(ValueError, match="at least 0"):
        check_options("apache-kafka-kraft", None, 3, controllers=-1)
    with pytest.raises(ValueError, match="no controller quorum"):
        allocate_ports(REFERENCE, [1, 2], controller_ids=[3])
