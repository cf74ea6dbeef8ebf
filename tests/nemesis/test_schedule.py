"""The nemesis schedule is a pure function of its seed and shape."""

import pytest

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
