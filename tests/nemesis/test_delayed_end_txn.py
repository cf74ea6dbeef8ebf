"""The delayed-end-txn fault (KAFKA-17754) without a cluster: what the schedule plans for it and
which toxics the executor adds and removes. Its runs on Kafka are tests/workload/
test_kafka_17754.py."""

from __future__ import annotations

import pytest

from harness.cluster.spec import ClusterSpec
from harness.nemesis import executor
from harness.nemesis.schedule import (
    DELAYED_END_TXN,
    DELAYED_END_TXN_FAULT_S,
    DELAYED_END_TXN_QUIET_S,
    FAULT_S,
    QUIET_S,
    TXN_COORDINATORS,
    pacing,
    plan,
)


class _Cluster:
    spec = ClusterSpec(brokers=3)


class _Toxics:
    offers_toxics = True

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def add_toxic(self, link, type, attributes, *, stream, toxicity, name):  # noqa: A002
        self.calls.append(("add", link, type, dict(attributes), stream, toxicity, name))
        return name

    def remove_toxic(self, link, name):
        self.calls.append(("remove", link, name))


def test_alone_it_comes_in_short_windows_close_together_on_the_coordinators():
    fault_s, quiet_s = pacing((DELAYED_END_TXN,))
    assert (fault_s, quiet_s) == (DELAYED_END_TXN_FAULT_S, DELAYED_END_TXN_QUIET_S)
    assert pacing(("kill", DELAYED_END_TXN)) == (FAULT_S, QUIET_S)
    steps = plan(7, [DELAYED_END_TXN], 30, 3, fault_s=fault_s, quiet_s=quiet_s)
    assert steps == plan(7, [DELAYED_END_TXN], 30, 3, fault_s=fault_s, quiet_s=quiet_s)
    assert len(steps) >= 5 and {s.target for s in steps} == {TXN_COORDINATORS}
    assert all(2.5 <= s.heal_at_s - s.at_s <= 4.0 for s in steps)


def test_it_holds_requests_to_each_coordinator_of_a_running_client_and_lifts_them_there(
        monkeypatch):
    coordinators = {"run-txn-0-p1": "broker-2", "run-txn-1-p2": "broker-2",
                    "run-txn-1-p3": "broker-3"}
    monkeypatch.setattr(executor.roles, "resolve",
                        lambda cluster, target: coordinators[target.split(":", 1)[1]])
    network = _Toxics()
    target = executor.FaultTarget(_Cluster(), network,  # type: ignore[arg-type]
                                  txn_ids=lambda: sorted(coordinators))
    (step,) = plan(1, [DELAYED_END_TXN], 9, 3, fault_s=(2.5, 2.5))
    account = target.apply(step)
    assert "broker-2 (of run-txn-0-p1, run-txn-1-p2); broker-3 (of run-txn-1-p3)" in account
    target.heal(step)
    held = {"latency": 4000, "jitter": 0}
    assert network.calls == [
        ("add", "client->broker-2", "latency", held, "upstream", 0.5, "nemesis-delayed-end-txn"),
        ("add", "client->broker-3", "latency", held, "upstream", 0.5, "nemesis-delayed-end-txn"),
        ("remove", "client->broker-2", "nemesis-delayed-end-txn"),
        ("remove", "client->broker-3", "nemesis-delayed-end-txn"),
    ]


def test_it_needs_transactional_clients_and_a_coordinator_to_hold(monkeypatch):
    assert "no transactional clients" in executor.FaultTarget(
        _Cluster(), _Toxics()).unsupported(DELAYED_END_TXN)  # type: ignore[arg-type]

    def nobody(cluster, target):
        raise executor.roles.NoHolder(target)

    monkeypatch.setattr(executor.roles, "resolve", nobody)
    target = executor.FaultTarget(_Cluster(), _Toxics(),  # type: ignore[arg-type]
                                  txn_ids=lambda: ["run-txn-0-p1"])
    (step,) = plan(1, [DELAYED_END_TXN], 9, 3, fault_s=(2.5, 2.5))
    with pytest.raises(RuntimeError, match="no transaction coordinator found"):
        target.apply(step)
