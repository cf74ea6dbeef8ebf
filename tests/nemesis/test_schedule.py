"""The nemesis schedule is a pure function of its seed and shape."""

import pytest

from harness.cluster.spec import ClusterSpec
from harness.nemesis.schedule import FAULTS, parse_faults, plan


def test_the_same_seed_gives_the_same_schedule():
    first = plan(42, ("partition", "kill", "pause"), 120, 3)
    again = plan(42, ("pause", "kill", "partition"), 120, 3)  # the order asked in does not matter
    assert first == again
    assert len(first) >= 5


def test_different_seeds_give_different_schedules():
    schedules = {tuple(plan(seed, ("partition", "kill"), 120, 3)) for seed in range(10)}
    assert len(schedules) == 10


def test_faults_come_one_at_a_time_and_heal_before_the_tail():
    steps = plan(3, tuple(FAULTS), 90, 5, tail_s=4.0)
    assert {s.fault for s in steps} <= set(FAULTS)
    for step, following in zip(steps, steps[1:], strict=False):
        assert step.at_s < step.heal_at_s < following.at_s
    assert steps[-1].heal_at_s <= 90 - 4.0
    assert all(s.heal.startswith("heal ") for s in steps)


def test_targets_name_real_nodes_and_shapes():
    steps = plan(9, ("partition", "kill", "pause", "latency"), 600, 3)
    brokers = {"broker-1", "broker-2", "broker-3"}
    for step in steps:
        if step.fault == "partition":
            shape, _, node = step.target.partition(" ")
            assert shape in ("isolate", "halves", "ring", "bridge")
            assert node in brokers if shape == "isolate" else node == ""
        else:
            assert step.target in brokers


def test_one_broker_is_only_ever_isolated():
    steps = plan(1, ("partition",), 300, 1)
    assert steps and {s.target for s in steps} == {"isolate broker-1"}


def test_no_faults_or_no_room_means_an_empty_schedule():
    assert plan(1, (), 300, 3) == []
    assert plan(1, ("kill",), 5, 3) == []


def test_parse_faults_names_the_allowed_ones():
    assert parse_faults("none") == ()
    assert parse_faults("partition, kill,partition") == ("partition", "kill")
    with pytest.raises(ValueError, match="unknown nemesis fault.*explode.*allowed: partition"):
        parse_faults("partition,explode")


def test_repeated_faults_on_a_role_as_kafkas_replication_test_makes_them():
    from harness.nemesis.roles import Role, RoleKind, parse_role
    from harness.nemesis.schedule import CONTROLLER, leader_of, repeated

    steps = repeated("kill", leader_of("replication", 0), 3, start_s=5, held_s=8, quiet_s=4)
    assert [(s.at_s, s.heal_at_s) for s in steps] == [(5, 13), (17, 25), (29, 37)]
    assert {s.target for s in steps} == {"leader of replication-0"}
    assert parse_role(steps[0].target) == Role(RoleKind.LEADER, "replication", 0)
    assert parse_role(leader_of("a-b-c", 12)) == Role(RoleKind.LEADER, "a-b-c", 12)
    assert parse_role(CONTROLLER) == Role(RoleKind.CONTROLLER)
    assert parse_role("broker-2") is None
    bounces = repeated("stop", CONTROLLER, 2, start_s=1, held_s=0, quiet_s=3)
    assert [(s.at_s, s.heal_at_s) for s in bounces] == [(1, 1), (4, 4)]
    with pytest.raises(ValueError, match="act on one node"):
        repeated("partition", "halves", 1, start_s=0, held_s=1, quiet_s=1)
    (slow,) = repeated("bandwidth", leader_of("t", 0), 1, start_s=2, held_s=5, quiet_s=0)
    assert (slow.fault, slow.at_s, slow.heal_at_s) == ("bandwidth", 2, 7)


class _Roles:
    """Just enough of a cluster for FaultTarget to resolve roles: the leader moves each time
    it is asked, as it does after each fault."""

    def __init__(self) -> None:
        self.leaders = iter([2, 3])
        self.spec = ClusterSpec(brokers=3)

    def leader(self, topic: str, partition: int) -> int:
        return next(self.leaders)

    def controller_id(self) -> int:
        return 1


def test_a_role_is_resolved_when_applied_and_its_heal_acts_on_the_same_broker(monkeypatch):
    from harness.nemesis import executor
    from harness.nemesis.schedule import CONTROLLER, leader_of, repeated

    acted: list[tuple[str, str]] = []
    monkeypatch.setattr(executor.process_faults, "apply",
                        lambda cluster, action, node: acted.append((action, node)) or {})
    target = executor.FaultTarget(_Roles())  # type: ignore[arg-type]
    first, second = repeated("kill", leader_of("t", 0), 2, start_s=0, held_s=1, quiet_s=1)
    target.apply(first)
    target.heal(first)
    target.apply(second)
    target.heal(second)
    (controller,) = repeated("stop", CONTROLLER, 1, start_s=0, held_s=0, quiet_s=0)
    assert "was broker-1" in target.apply(controller)
    assert acted == [("kill", "broker-2"), ("restart", "broker-2"),
                     ("kill", "broker-3"), ("restart", "broker-3"), ("stop", "broker-1")]


class _Toxics:
    """Just enough of a network mechanism to see which toxics a FaultTarget adds and removes."""

    offers_toxics = True

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def add_toxic(self, link, type, attributes, *, stream, name):  # noqa: A002
        self.calls.append(("add", link, type, dict(attributes), stream, name))
        return name

    def remove_toxic(self, link, name):
        self.calls.append(("remove", link, name))


def test_a_degraded_link_follows_its_role_and_its_heal_removes_the_same_toxic():
    from harness.nemesis import executor
    from harness.nemesis.schedule import leader_of, repeated

    network = _Toxics()
    target = executor.FaultTarget(_Roles(), network)  # type: ignore[arg-type]
    latency, bandwidth = (repeated(fault, leader_of("t", 0), 1, start_s=0, held_s=1,
                                   quiet_s=0)[0] for fault in ("latency", "bandwidth"))
    assert target.apply(latency).startswith("leader of t-0 was broker-2: latency")
    target.heal(latency)
    target.apply(bandwidth)
    target.heal(bandwidth)
    assert network.calls == [
        ("add", "client->broker-2", "latency", {"latency": 100, "jitter": 50}, "downstream",
         "nemesis-latency"),
        ("remove", "client->broker-2", "nemesis-latency"),
        ("add", "client->broker-3", "bandwidth", {"rate": 2}, "upstream", "nemesis-bandwidth"),
        ("remove", "client->broker-3", "nemesis-bandwidth"),
    ]
