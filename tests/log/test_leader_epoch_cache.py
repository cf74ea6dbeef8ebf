import logging

import pytest

from reference_broker.log.leader_epoch_cache import (
    EpochEntry,
    LeaderEpochFileCache,
    parse_leader_epoch_checkpoint,
)


def entries(cache):
    return [(e.epoch, e.start_offset) for e in cache.epoch_entries()]


def cache_with(tmp_path, *pairs):
    cache = LeaderEpochFileCache(tmp_path / "leader-epoch-checkpoint")
    for epoch, start in pairs:
        cache.assign(epoch, start)
    return cache


def test_new_cache_is_empty_and_asks_for_a_rebuild(tmp_path):
    cache = LeaderEpochFileCache(tmp_path / "leader-epoch-checkpoint")
    assert cache.needs_rebuild
    assert cache.latest_epoch is None and cache.latest_entry is None
    assert cache.end_offset_for(0, 10) == (-1, -1)


def test_assign_records_new_epochs_and_ignores_repeats(tmp_path):
    cache = cache_with(tmp_path)
    assert cache.assign(0, 0)
    assert not cache.assign(0, 5)  # every later append of the same epoch
    assert cache.assign(1, 7)
    assert not cache.assign(1, 7)
    assert entries(cache) == [(0, 0), (1, 7)]
    assert cache.latest_epoch == 1
    assert cache.latest_entry == EpochEntry(1, 7)


def test_assign_of_an_entry_that_does_not_follow_replaces_what_it_contradicts(tmp_path, caplog):
    cache = cache_with(tmp_path, (0, 0), (2, 10), (3, 20))
    with caplog.at_level(logging.WARNING, logger="reference_broker.log"):
        assert cache.assign(1, 15)  # lower epoch: every entry with epoch >= 1 goes
    assert entries(cache) == [(0, 0), (1, 15)]
    assert "replaces entries" in caplog.text
    assert cache.assign(5, 12)  # larger epoch but earlier start: (1, 15) goes
    assert entries(cache) == [(0, 0), (5, 12)]
    assert cache.assign(5, 11)  # same epoch, earlier start: moved back
    assert entries(cache) == [(0, 0), (5, 11)]


def test_an_epoch_without_data_is_replaced_quietly(tmp_path, caplog):
    cache = cache_with(tmp_path, (0, 0), (3, 10))  # became leader at 10, wrote nothing
    with caplog.at_level(logging.WARNING, logger="reference_broker.log"):
        cache.assign(2, 10)
    assert entries(cache) == [(0, 0), (2, 10)]
    assert caplog.text == ""


def test_assign_refuses_negative_values(tmp_path):
    cache = cache_with(tmp_path)
    with pytest.raises(ValueError):
        cache.assign(-1, 0)
    with pytest.raises(ValueError):
        cache.assign(0, -1)


def test_end_offset_for_follows_offsets_for_leader_epoch(tmp_path):
    cache = cache_with(tmp_path, (1, 5), (3, 20), (4, 30))
    log_end = 42
    assert cache.end_offset_for(4, log_end) == (4, 42)  # latest: the log end
    assert cache.end_offset_for(3, log_end) == (3, 30)  # ends where epoch 4 starts
    assert cache.end_offset_for(2, log_end) == (1, 20)  # unknown: largest epoch below it
    assert cache.end_offset_for(1, log_end) == (1, 20)
    assert cache.end_offset_for(0, log_end) == (0, 5)  # older than all: first start
    assert cache.end_offset_for(5, log_end) == (-1, -1)  # newer than all
    assert cache.end_offset_for(-1, log_end) == (-1, -1)  # undefined


def test_kip_101_divergence_scenario(tmp_path):
    leader = cache_with(tmp_path, (0, 0), (2, 10))
    # a follower that wrote epoch 1 data the leader never had asks where epoch 1 ends:
    # the leader's largest epoch <= 1 is 0, and it ended where epoch 2 began
    assert leader.end_offset_for(1, 25) == (0, 10)


def test_truncate_from_end_drops_epochs_starting_at_or_after_the_end(tmp_path):
    cache = cache_with(tmp_path, (0, 0), (1, 10), (2, 20))
    cache.truncate_from_end(20)
    assert entries(cache) == [(0, 0), (1, 10)]
    cache.truncate_from_end(15)
    assert entries(cache) == [(0, 0), (1, 10)]
    cache.truncate_from_end(0)
    assert entries(cache) == []
    assert LeaderEpochFileCache(cache.path).epoch_entries() == []


def test_truncate_from_start_moves_the_covering_epoch_to_the_new_start(tmp_path):
    cache = cache_with(tmp_path, (0, 0), (1, 10), (2, 20))
    cache.truncate_from_start(5)
    assert entries(cache) == [(0, 5), (1, 10), (2, 20)]
    cache.truncate_from_start(15)
    assert entries(cache) == [(1, 15), (2, 20)]
    cache.truncate_from_start(20)
    assert entries(cache) == [(2, 20)]
    cache.truncate_from_start(3)  # below every entry: nothing to do
    assert entries(cache) == [(2, 20)]
    assert entries(LeaderEpochFileCache(cache.path)) == [(2, 20)]


def test_clear_and_flush(tmp_path):
    cache = cache_with(tmp_path, (0, 0), (1, 10))
    cache.clear_and_flush()
    assert cache.latest_epoch is None
    assert cache.path.read_text() == "0\n0\n"


def test_checkpoint_file_round_trip_in_kafka_format(tmp_path):
    cache = cache_with(tmp_path, (0, 0), (2, 10), (7, 1234))
    assert cache.path.read_text() == "0\n3\n0 0\n2 10\n7 1234\n"
    reloaded = LeaderEpochFileCache(cache.path)
    assert not reloaded.needs_rebuild
    assert entries(reloaded) == [(0, 0), (2, 10), (7, 1234)]
    assert not (tmp_path / "leader-epoch-checkpoint.tmp").exists()


def test_checkpoint_written_only_when_entries_change(tmp_path):
    cache = cache_with(tmp_path, (0, 0))
    cache.path.write_text("0\n1\n0 0\n")
    mtime = cache.path.stat().st_mtime_ns
    cache.assign(0, 100)
    cache.truncate_from_end(50)
    cache.truncate_from_start(0)
    assert cache.path.stat().st_mtime_ns == mtime


@pytest.mark.parametrize(
    "text",
    [
        "",
        "0\n",
        "1\n0\n",  # unknown version
        "0\nx\n",
        "0\n2\n0 0\n",  # fewer entries than announced
        "0\n1\n0 0 0\n",
        "0\n1\nzero 0\n",
        "0\n1\n-1 5\n",
        "0\n2\n3 10\n2 20\n",  # epochs must increase
        "0\n2\n2 10\n3 10\n",  # start offsets must increase
    ],
)
def test_corrupt_checkpoint_is_reported_and_flagged_for_rebuild(tmp_path, caplog, text):
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text(text)
    with caplog.at_level(logging.ERROR, logger="reference_broker.log"):
        cache = LeaderEpochFileCache(path)
    assert cache.needs_rebuild
    assert cache.epoch_entries() == []
    assert f"leader epoch checkpoint {path} is corrupt" in caplog.text
    with pytest.raises(ValueError):
        parse_leader_epoch_checkpoint(text)


def test_undecodable_checkpoint_is_flagged_for_rebuild(tmp_path, caplog):
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_bytes(b"\xff\xfe\x00")
    with caplog.at_level(logging.ERROR, logger="reference_broker.log"):
        assert LeaderEpochFileCache(path).needs_rebuild
    assert "rebuilding it from the log" in caplog.text


def test_rebuild_replays_pairs_and_skips_batches_without_epoch(tmp_path):
    cache = cache_with(tmp_path, (9, 0))
    cache.rebuild([(-1, 0), (0, 3), (0, 5), (1, 8), (1, 9), (4, 12)])
    assert entries(cache) == [(0, 3), (1, 8), (4, 12)]
    assert not cache.needs_rebuild
    assert entries(LeaderEpochFileCache(cache.path)) == [(0, 3), (1, 8), (4, 12)]
