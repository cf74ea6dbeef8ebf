"""LeaderAndIsr as a replica applies it: a state older than the one held is left alone.

Found in a loaded test run (tests/nemesis/test_network_faults.py): the controller's
LeaderAndIsr to a leader was cut off by an isolation fault and retried after the heal. By then
the leader had written a smaller ISR to ZooKeeper. Applying the retried request put the old ISR
and znode version back, so the leader's next ISR write lost to its own earlier one, and the ISR
in ZooKeeper never grew back. Kafka skips such a state (its partition epoch is older).
"""

from __future__ import annotations

from dataclasses import replace

from harness.wire.errors import ErrorCode
from reference_broker.log.log_config import LogConfig
from reference_broker.log.log_manager import LogManager
from reference_broker.server.replica_manager import PartitionState, ReplicaManager

CONFIG = LogConfig()
CREATED = PartitionState("t", 0, controller_epoch=1, leader=1, leader_epoch=0, isr=(1, 2, 3),
                         zk_version=0, replicas=(1, 2, 3), is_new=True)


def _apply(replicas: ReplicaManager, state: PartitionState):
    return replicas.become_leader_or_follower([state], lambda _: CONFIG, now_ms=0)


def test_a_retried_leader_and_isr_does_not_undo_the_leaders_own_isr_write(tmp_path):
    logs = LogManager([tmp_path], CONFIG, broker_id=1, cluster_id="c")
    try:
        replicas = ReplicaManager(1, logs)
        assert [p.topic for p in _apply(replicas, CREATED).new_leaders] == ["t"]
        partition = replicas.partition("t", 0)
        assert partition is not None
        partition.apply_isr((1,), 1)  # the leader shrank the ISR; ZooKeeper answered version 1

        retried = _apply(replicas, replace(CREATED, is_new=False))
        assert retried.errors == {("t", 0): ErrorCode.none}
        assert not retried.new_leaders and not retried.new_followers
        assert (partition.isr, partition.zk_version) == ((1,), 1)

        # The same leader epoch at the version held, or a newer one, is applied.
        same = _apply(replicas, replace(CREATED, isr=(1, 2), zk_version=1))
        assert same.errors == {("t", 0): ErrorCode.none}
        assert (partition.isr, partition.zk_version) == ((1, 2), 1)
        moved = _apply(replicas, replace(CREATED, leader=2, leader_epoch=1, isr=(2, 1),
                                         zk_version=2))
        assert [p.topic for p in moved.new_followers] == ["t"]
        assert (partition.leader_id, partition.leader_epoch, partition.zk_version) == (2, 1, 2)
    finally:
        logs.shutdown()
