"""Role targets as the shell and the schedules write them, parsed and resolved against a
cluster's own state (here a stand-in: resolving is asking the cluster, no more)."""

from __future__ import annotations

import pytest

from harness.cluster.spec import ClusterSpec
from harness.nemesis.roles import (
    NoHolder,
    Role,
    RoleKind,
    for_transactional_id,
    holder,
    parse_role,
    resolve,
)


def test_each_role_form_parses_and_prints_back_as_the_shell_writes_it():
    assert parse_role("controller") == Role(RoleKind.CONTROLLER)
    assert parse_role("leader:orders/3") == Role(RoleKind.LEADER, "orders", 3)
    assert parse_role("leader:a/b/0") == Role(RoleKind.LEADER, "a/b", 0)
    assert parse_role("leader of orders-3") == Role(RoleKind.LEADER, "orders", 3)
    assert parse_role("coordinator:my-group") == Role(RoleKind.COORDINATOR, group="my-group")
    assert parse_role("txn-coordinator:tx-1") == Role(RoleKind.TXN_COORDINATOR, group="tx-1")
    for text in ("controller", "leader:orders/3", "coordinator:my-group", "txn-coordinator:t:1"):
        assert str(parse_role(text)) == text
    for node in ("broker-1", "zk", "client"):
        assert parse_role(node) is None


def test_the_keyless_txn_coordinator_is_a_run_clients_and_the_shell_is_told_to_name_one():
    """A run's nemesis binds ``txn-coordinator`` to one of its clients' ids; a shell, which
    knows no client, cannot resolve it."""
    anyone = parse_role("txn-coordinator")
    assert anyone == Role(RoleKind.TXN_COORDINATOR) and str(anyone) == "txn-coordinator"
    bound = for_transactional_id(anyone, "run-txn-0-p3")
    assert str(bound) == "txn-coordinator:run-txn-0-p3"
    assert for_transactional_id(bound, "other") == bound
    assert for_transactional_id(Role(RoleKind.CONTROLLER), "x") == Role(RoleKind.CONTROLLER)
    with pytest.raises(NoHolder, match="txn-coordinator:TRANSACTIONAL_ID"):
        holder(None, anyone)  # type: ignore[arg-type]


@pytest.mark.parametrize("wrong", ["leader:orders", "leader:orders/x", "coordinator:",
                                   "txn-coordinator:"])
def test_a_role_spelt_wrong_is_refused_with_the_forms_there_are(wrong):
    forms = "leader:TOPIC/PARTITION|coordinator:(GROUP|TRANSACTIONAL_ID)"
    with pytest.raises(ValueError, match=forms):
        parse_role(wrong)


class _State:
    """What resolving reads of a cluster: its controller and a partition's leader."""

    def __init__(self, controller: int | None, leader: int | None, *,
                 controllers: int = 0) -> None:
        self._controller, self._leader = controller, leader
        self.spec = ClusterSpec(brokers=3, controllers=controllers)

    def controller_id(self) -> int | None:
        return self._controller

    def leader(self, topic: str, partition: int) -> int | None:
        return self._leader


def test_a_role_resolves_to_the_broker_holding_it_now_and_a_node_to_itself():
    cluster = _State(controller=2, leader=3)
    assert resolve(cluster, "controller") == "broker-2"  # type: ignore[arg-type]
    assert resolve(cluster, "leader:orders/0") == "broker-3"  # type: ignore[arg-type]
    assert resolve(cluster, "broker-1") == "broker-1"  # type: ignore[arg-type]
    # With dedicated controllers (ids after the brokers'), the controller is one of them.
    assert resolve(_State(5, 3, controllers=3), "controller") == "controller-5"  # type: ignore[arg-type]
    with pytest.raises(NoHolder, match="no broker is controller now"):
        holder(_State(None, 3), Role(RoleKind.CONTROLLER))  # type: ignore[arg-type]
    with pytest.raises(NoHolder, match="leader:orders/0"):
        holder(_State(1, -1), Role(RoleKind.LEADER, "orders", 0))  # type: ignore[arg-type]
