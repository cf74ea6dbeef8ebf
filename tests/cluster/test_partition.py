"""Partition's replication rules without sockets: the high watermark, ISR shrink and expand,
and the acks=all outcomes (Kafka's Partition in ZooKeeper mode)."""

from __future__ import annotations

import pytest

from harness.wire.errors import ErrorCode
from harness.wire.records import read_header
from reference_broker.cluster.partition import Partition, PartitionError
from reference_broker.log.log_config import LogConfig
from reference_broker.log.unified_log import UnifiedLog
from tests.log.log_testing import batch

LAG_MS = 1000


@pytest.fixture
def leader(tmp_path):
    log = UnifiedLog.open(tmp_path / "t-0", LogConfig())
    moved: list[int] = []
    part = Partition("t", 0, log, 1, lambda p: moved.append(p.high_watermark))
    part.make_leader(5, (1, 2, 3), (1, 2, 3), controller_epoch=1, zk_version=0, now_ms=0,
                     standalone=False)
    part.moved = moved  # type: ignore[attr-defined]
    yield part
    log.close()


def _append(part: Partition, count: int, acks: int = -1, min_isr: int = 1) -> object:
    data = batch(count)
    return part.append_records_to_leader(data, read_header(data), now_ms=0,
                                         required_acks=acks, min_insync_replicas=min_isr)


def test_high_watermark_is_the_smallest_log_end_in_the_isr(leader):
    _append(leader, 10)
    assert leader.high_watermark == 0  # followers have nothing yet
    assert leader.update_follower_fetch_state(2, 10, now_ms=1) is None
    assert leader.high_watermark == 0  # follower 3 still at 0
    leader.update_follower_fetch_state(3, 4, now_ms=1)
    assert leader.high_watermark == 4
    leader.update_follower_fetch_state(3, 10, now_ms=2)
    assert leader.high_watermark == 10
    assert leader.moved == [4, 10]


def test_a_lagging_follower_leaves_the_isr_and_rejoins_at_the_high_watermark(leader):
    _append(leader, 10)
    leader.update_follower_fetch_state(2, 10, now_ms=100)
    leader.update_follower_fetch_state(3, 2, now_ms=100)  # behind since it joined at 0
    assert leader.shrunk_isr(now_ms=LAG_MS - 1, max_lag_ms=LAG_MS) is None
    assert leader.shrunk_isr(now_ms=LAG_MS + 1, max_lag_ms=LAG_MS) == (1, 2)
    leader.apply_isr((1, 2), zk_version=1)
    assert leader.high_watermark == 10  # no longer held back by follower 3
    assert leader.update_follower_fetch_state(3, 9, now_ms=LAG_MS + 2) is None
    assert leader.update_follower_fetch_state(3, 10, now_ms=LAG_MS + 3) == (1, 2, 3)


def test_a_caught_up_follower_is_never_shrunk(leader):
    _append(leader, 3)
    for replica in (2, 3):
        leader.update_follower_fetch_state(replica, 3, now_ms=0)
    assert leader.shrunk_isr(now_ms=10 * LAG_MS, max_lag_ms=LAG_MS) is None


def test_acks_all_outcomes(leader):
    result = _append(leader, 2)
    required = result.last_offset + 1
    assert leader.acks_all_outcome(required, min_insync_replicas=2) is None  # waiting
    leader.update_follower_fetch_state(2, required, now_ms=1)
    leader.update_follower_fetch_state(3, required, now_ms=1)
    assert leader.acks_all_outcome(required, min_insync_replicas=2) == ErrorCode.none
    leader.apply_isr((1,), zk_version=1)
    assert leader.acks_all_outcome(required, min_insync_replicas=2) == \
        ErrorCode.not_enough_replicas_after_append
    with pytest.raises(PartitionError) as refused:
        _append(leader, 1, acks=-1, min_isr=2)
    assert refused.value.error == ErrorCode.not_enough_replicas
    _append(leader, 1, acks=1, min_isr=2)  # acks=1 ignores min.insync.replicas


def test_leader_epoch_checks_and_follower_state(leader):
    leader.check_leader_epoch(5)
    leader.check_leader_epoch(-1)
    with pytest.raises(PartitionError, match="FENCED_LEADER_EPOCH"):
        leader.check_leader_epoch(4)
    with pytest.raises(PartitionError, match="UNKNOWN_LEADER_EPOCH"):
        leader.check_leader_epoch(6)
    _append(leader, 4)
    assert leader.make_follower(2, 6, (1, 2, 3), (2, 3), controller_epoch=2, zk_version=1)
    assert not leader.is_leader
    with pytest.raises(PartitionError) as not_leader:
        _append(leader, 1)
    assert not_leader.value.error == ErrorCode.not_leader_or_follower
    leader.update_follower_high_watermark(100)
    assert leader.high_watermark == 4  # never beyond its own log end
    assert leader.log.end_offset_for_epoch(5) == (5, 4)
