"""Faults aimed at roles in a planned schedule — the leaders and a running client's transaction
coordinator, as the transactions suite's chaos runs aim them — without a cluster: what the
plan names, and which node the executor resolves each to when it applies the fault."""

from __future__ import annotations

import pytest

from harness.cluster.spec import ClusterSpec
from harness.nemesis import executor
from harness.nemesis.schedule import (
    AIMED_FAULTS,
    TXN_COORDINATOR,
    Step,
    leader_of,
    plan,
)

FAULTS = ("partition", "kill", "pause", "lose-unflushed")
TARGETS = (leader_of("workload", 0), TXN_COORDINATOR)


def test_a_plan_with_targets_aims_every_node_fault_at_them_in_turn():
    steps = plan(5, FAULTS, 120, 3, targets=TARGETS)
    assert steps == plan(5, FAULTS, 120, 3, targets=TARGETS)
    aimed = [s.target.removeprefix("isolate ") for s in steps]
    assert aimed == [TARGETS[i % 2] for i in range(len(steps))]
    assert {s.fault for s in steps} == set(FAULTS)
    # When and which faults come is the seed's alone: targets change only what they act on.
    untargeted = plan(5, FAULTS, 120, 3)
    assert [(s.at_s, s.heal_at_s, s.fault) for s in steps] == \
           [(s.at_s, s.heal_at_s, s.fault) for s in untargeted]


def test_faults_that_act_on_no_node_keep_their_own_targets():
    assert "crash-client" not in AIMED_FAULTS and "delayed-end-txn" not in AIMED_FAULTS
    steps = plan(2, ("crash-client", "kill"), 120, 3, targets=(TXN_COORDINATOR,))
    assert {s.target for s in steps if s.fault == "crash-client"} == {"client"}
    assert {s.target for s in steps if s.fault == "kill"} == {TXN_COORDINATOR}


class _Cluster:
    """A cluster's state as roles read it: a leader that appears on the second look, and the
    transaction coordinator each transactional id has (FindCoordinator's answer)."""

    spec = ClusterSpec(brokers=3)

    def __init__(self, coordinators: dict[str, int]) -> None:
        self.coordinators = coordinators
        self.leaders = iter([None, 3])

    def leader(self, topic: str, partition: int) -> int | None:
        return next(self.leaders)


@pytest.fixture
def cluster(monkeypatch) -> _Cluster:
    state = _Cluster({"run-txn-0-p1": 1, "run-txn-1-p2": 2})
    monkeypatch.setattr(executor.roles, "_coordinator",
                        lambda cluster, key, key_type: state.coordinators.get(key))
    return state


class _Network:
    def __init__(self) -> None:
        self.isolated: list[str] = []

    def isolate(self, node: str) -> list[tuple[str, str]]:
        self.isolated.append(node)
        return [(node, "zk"), ("zk", node)]

    def heal(self) -> None:
        self.isolated.append("healed")


def test_a_running_clients_coordinator_is_picked_when_applied_and_healed_there(
        monkeypatch, cluster):
    acted: list[tuple[str, str]] = []
    monkeypatch.setattr(executor.process_faults, "apply",
                        lambda cluster, action, node: acted.append((action, node)) or {})
    running = ["run-txn-1-p2", "run-txn-0-p1"]
    target = executor.FaultTarget(cluster, seed=3,  # type: ignore[arg-type]
                                  txn_ids=lambda: list(running))
    kill = Step(1.0, 2.0, "kill", TXN_COORDINATOR)
    account = target.apply(kill)
    txn_id = account.split(" was ")[0].removeprefix("txn-coordinator:")
    assert txn_id in running
    node = f"broker-{cluster.coordinators[txn_id]}"
    assert account.startswith(f"txn-coordinator:{txn_id} was {node}: ")
    cluster.coordinators[txn_id] = 3  # the coordinator moves while its broker is down
    target.heal(kill)
    assert acted == [("kill", node), ("restart", node)]


def test_a_partition_isolates_the_node_holding_the_role_waiting_for_one(cluster):
    network = _Network()
    target = executor.FaultTarget(cluster, network)  # type: ignore[arg-type]
    isolate = Step(1.0, 2.0, "partition", f"isolate {leader_of('workload', 0)}")
    assert target.apply(isolate) == "leader of workload-0 was broker-3: 2 directed links cut"
    target.heal(isolate)
    assert network.isolated == ["broker-3", "healed"]


def test_without_running_transactional_clients_the_coordinator_fault_is_not_done(cluster):
    for ids in (None, list):
        target = executor.FaultTarget(cluster, _Network(),  # type: ignore[arg-type]
                                      txn_ids=ids)
        with pytest.raises(RuntimeError, match="no transactional client is running"):
            target.apply(Step(1.0, 2.0, "partition", f"isolate {TXN_COORDINATOR}"))


def test_a_role_held_by_node_0_is_resolved_not_waited_for(monkeypatch):
    """Node id 0 is a holder (a recipe's broker may have it), not wait_for's "not yet"."""
    state = _Cluster({})
    state.leaders = iter([0])
    acted: list[tuple[str, str]] = []
    monkeypatch.setattr(executor.process_faults, "apply",
                        lambda cluster, action, node: acted.append((action, node)) or {})
    target = executor.FaultTarget(state)  # type: ignore[arg-type]
    target.apply(Step(1.0, 2.0, "pause", leader_of("workload", 0)))
    assert acted == [("pause", "broker-0")]
