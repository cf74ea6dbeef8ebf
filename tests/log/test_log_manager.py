import subprocess
import sys
import textwrap

import pytest

from reference_broker.log.checkpoint_file import read_checkpoint, write_checkpoint
from reference_broker.log.errors import LogDirError
from reference_broker.log.log_config import LogConfig
from reference_broker.log.log_manager import LogManager, read_properties
from tests.log.log_testing import FakeClock, append, batch

CONFIG = LogConfig()


@pytest.fixture
def dirs(tmp_path):
    return [tmp_path / "d1", tmp_path / "d2"]


def test_creates_locks_and_describes_log_dirs(dirs):
    manager = LogManager(dirs, CONFIG, broker_id=3, cluster_id="abc")
    for log_dir in dirs:
        assert (log_dir / ".lock").exists()
        assert read_properties(log_dir / "meta.properties") == {
            "version": "0",
            "broker.id": "3",
            "cluster.id": "abc",
        }
    manager.shutdown()
    LogManager(dirs, CONFIG, broker_id=3, cluster_id="abc").shutdown()


def test_second_broker_on_the_same_dir_fails_clearly(dirs):
    manager = LogManager(dirs, CONFIG)
    with pytest.raises(LogDirError, match="Failed to acquire lock on file .lock"):
        LogManager([dirs[1]], CONFIG)
    manager.shutdown()
    LogManager([dirs[1]], CONFIG).shutdown()  # released by shutdown


def test_log_dir_of_another_broker_is_refused(dirs):
    LogManager(dirs, CONFIG, broker_id=1).shutdown()
    with pytest.raises(LogDirError, match="broker.id 2 does not match broker.id 1"):
        LogManager(dirs, CONFIG, broker_id=2)
    LogManager(dirs, CONFIG, broker_id=1).shutdown()  # the failed start released its locks


def test_new_logs_go_to_the_dir_with_fewest_partitions(dirs):
    manager = LogManager(dirs, CONFIG)
    placed = [manager.get_or_create_log("t", p).directory.parent for p in range(4)]
    assert placed == [dirs[0], dirs[1], dirs[0], dirs[1]]
    assert manager.get_or_create_log("t", 0) is manager.get_log("t", 0)
    assert manager.get_log("t", 9) is None
    assert len(manager.all_logs()) == 4
    with pytest.raises(ValueError, match="illegal topic name"):
        manager.get_or_create_log("bad/name", 0)
    manager.shutdown()


def test_clean_restart_loads_everything_and_trusts_it(dirs):
    manager = LogManager(dirs, CONFIG)
    for partition in range(3):
        log = manager.get_or_create_log("orders", partition)
        for _ in range(partition + 1):
            append(log, batch(2))
    manager.shutdown()
    for log_dir in dirs:
        assert (log_dir / ".kafka_cleanshutdown").exists()
    assert read_checkpoint(dirs[0] / "recovery-point-offset-checkpoint") == {
        ("orders", 0): 2,
        ("orders", 2): 6,
    }
    assert (dirs[1] / "log-start-offset-checkpoint").read_text() == "0\n1\norders 1 0\n"

    restarted = LogManager(dirs, CONFIG)
    assert {(lg.topic_partition, lg.log_end_offset) for lg in restarted.all_logs()} == {
        (("orders", 0), 2),
        (("orders", 1), 4),
        (("orders", 2), 6),
    }
    assert all(lg.recovery_point == lg.log_end_offset for lg in restarted.all_logs())
    for log_dir in dirs:
        assert not (log_dir / ".kafka_cleanshutdown").exists()  # a crash now is not clean
    restarted.shutdown()


def test_crashed_broker_releases_its_lock_and_is_recovered(dirs):
    script = textwrap.dedent(
        f"""
        import os, sys
        sys.path.insert(0, {str(__file__.rsplit("/", 1)[0])!r})
        from pathlib import Path
        from log_testing import append, batch
        from reference_broker.log.log_config import LogConfig
        from reference_broker.log.log_manager import LogManager
        manager = LogManager([Path(p) for p in {[str(d) for d in dirs]!r}], LogConfig())
        log = manager.get_or_create_log("t", 0)
        for _ in range(3):
            append(log, batch(1))
        log.flush(2)
        manager.checkpoint_recovery_points()
        append(log, batch(1))
        with open(log.segments[-1].log_path, "ab") as out:
            out.write(b"torn")  # a write the crash interrupted
        os._exit(0)
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True)
    assert not (dirs[0] / ".kafka_cleanshutdown").exists()
    manager = LogManager(dirs, CONFIG)
    log = manager.get_log("t", 0)
    assert log.log_end_offset == 4
    assert log.recovery_point == 2  # from the checkpoint: only the rest was recovered
    manager.shutdown()


def test_delete_log_removes_directory_and_checkpoint_entry(dirs):
    manager = LogManager(dirs, CONFIG)
    log = manager.get_or_create_log("gone", 0)
    append(log, batch(1))
    manager.get_or_create_log("kept", 0)
    manager.checkpoint_recovery_points()
    directory = log.directory
    assert manager.delete_log("gone", 0)
    assert not manager.delete_log("gone", 0)
    assert not directory.exists()
    assert not list(dirs[0].glob("*-delete"))
    assert manager.get_log("gone", 0) is None
    assert ("gone", 0) not in read_checkpoint(dirs[0] / "recovery-point-offset-checkpoint")
    manager.shutdown()


def test_start_up_removes_leftovers_and_ignores_foreign_entries(dirs):
    leftover = dirs[0] / "t-0.0123abc-delete"
    leftover.mkdir(parents=True)
    (leftover / "00000000000000000000.log").write_bytes(b"x")
    (dirs[0] / "not a partition").mkdir()
    (dirs[0] / "standalone-metadata.json").write_text("{}")
    manager = LogManager(dirs, CONFIG)
    assert not leftover.exists()
    assert manager.all_logs() == []
    assert (dirs[0] / "not a partition").exists()
    manager.shutdown()


def test_same_partition_in_two_log_dirs_is_an_error(dirs):
    for log_dir in dirs:
        (log_dir / "t-0").mkdir(parents=True)
    with pytest.raises(LogDirError, match="duplicate log directories"):
        LogManager(dirs, CONFIG)
    LogManager([dirs[0]], CONFIG).shutdown()


def test_malformed_checkpoint_means_full_recovery(dirs, caplog):
    manager = LogManager(dirs[:1], CONFIG)
    append(manager.get_or_create_log("t", 0), batch(1))
    manager.shutdown()
    (dirs[0] / ".kafka_cleanshutdown").unlink()
    (dirs[0] / "recovery-point-offset-checkpoint").write_text("0\n5\nt 0 1\n")
    restarted = LogManager(dirs[:1], CONFIG)
    assert restarted.get_log("t", 0).recovery_point == 0
    assert "malformed checkpoint" in caplog.text
    restarted.shutdown()


def test_topic_configs_apply_at_load_and_on_update(dirs):
    manager = LogManager(dirs, CONFIG)
    manager.get_or_create_log("a", 0)
    manager.get_or_create_log("a", 1)
    manager.get_or_create_log("b", 0)
    small = CONFIG.with_overrides(segment_bytes=1000)
    manager.update_config("a", small)
    assert [lg.config for lg in manager.all_logs()] == [small, small, CONFIG]
    manager.shutdown()
    restarted = LogManager(dirs, CONFIG, topic_configs={"b": small})
    assert restarted.get_log("b", 0).config == small
    assert restarted.get_log("a", 0).config == CONFIG
    restarted.get_or_create_log("a", 0, small)  # the caller's config wins for a loaded log
    assert restarted.get_log("a", 0).config == small
    restarted.shutdown()


def test_periodic_flush_and_cleanup(dirs):
    clock = FakeClock(10**9)
    config = LogConfig(flush_interval_ms=1_000, retention_bytes=0, segment_bytes=len(batch(1)))
    manager = LogManager(dirs, config, now_ms=clock)
    log = manager.get_or_create_log("t", 0)
    for _ in range(3):
        append(log, batch(1))
    append(manager.get_or_create_log("t", 1), batch(1))
    assert manager.flush_dirty_logs(clock.now) == 0
    clock.advance(1_000)
    assert log.recovery_point == 2  # rolls flushed the old segments, not the active one
    assert manager.flush_dirty_logs(clock.now) == 2
    assert log.recovery_point == 3
    assert manager.flush_dirty_logs(clock.now + 5_000) == 0  # nothing left to flush
    assert manager.cleanup_logs(clock.now) == 2
    assert log.log_start_offset == 2
    manager.shutdown()
    manager.shutdown()  # idempotent


def test_checkpoint_round_trip(tmp_path):
    path = tmp_path / "cp"
    write_checkpoint(path, {("a-b.c", 0): 5, ("x", 12): 0})
    assert path.read_text() == "0\n2\na-b.c 0 5\nx 12 0\n"
    assert read_checkpoint(path) == {("a-b.c", 0): 5, ("x", 12): 0}
    assert read_checkpoint(tmp_path / "missing") == {}
    assert not list(tmp_path.glob("*.tmp"))


def test_high_watermarks_are_checkpointed_per_log_dir(dirs):
    manager = LogManager(dirs, CONFIG)
    for partition in range(3):
        manager.get_or_create_log("orders", partition)  # 0 and 2 in d1, 1 in d2
    assert manager.high_watermarks() == {}  # no checkpoint yet
    manager.checkpoint_high_watermarks(
        {("orders", 0): 5, ("orders", 1): 7, ("orders", 2): 0, ("gone", 0): 9}
    )
    assert (dirs[1] / "replication-offset-checkpoint").read_text() == "0\n1\norders 1 7\n"
    assert read_checkpoint(dirs[0] / "replication-offset-checkpoint") == {
        ("orders", 0): 5,
        ("orders", 2): 0,
    }
    manager.checkpoint_high_watermarks({("orders", 0): 6})
    assert read_checkpoint(dirs[1] / "replication-offset-checkpoint") == {}
    manager.checkpoint_high_watermarks({("orders", 0): 6, ("orders", 1): 8, ("orders", 2): 1})
    manager.shutdown()

    restarted = LogManager(dirs, CONFIG)
    assert restarted.high_watermarks() == {("orders", 0): 6, ("orders", 1): 8, ("orders", 2): 1}
    restarted.shutdown()


def test_high_watermarks_ignore_entries_for_logs_elsewhere(dirs):
    manager = LogManager(dirs, CONFIG)
    manager.get_or_create_log("t", 0)  # in d1
    manager.shutdown()
    write_checkpoint(dirs[0] / "replication-offset-checkpoint", {("t", 0): 3, ("x", 0): 4})
    write_checkpoint(dirs[1] / "replication-offset-checkpoint", {("t", 0): 99})
    restarted = LogManager(dirs, CONFIG)
    assert restarted.high_watermarks() == {("t", 0): 3}
    restarted.shutdown()


def test_damaged_high_watermark_checkpoint_reads_as_empty(dirs, caplog):
    manager = LogManager(dirs, CONFIG)
    manager.get_or_create_log("t", 0)
    manager.checkpoint_high_watermarks({("t", 0): 3})
    (dirs[0] / "replication-offset-checkpoint").write_text("0\n5\nt 0 3\n")
    assert manager.high_watermarks() == {}
    assert "malformed checkpoint file" in caplog.text
    manager.shutdown()


def test_deleting_a_log_forgets_its_high_watermark(dirs):
    manager = LogManager(dirs, CONFIG)
    manager.get_or_create_log("t", 0)
    manager.get_or_create_log("t", 1)
    manager.checkpoint_high_watermarks({("t", 0): 3, ("t", 1): 4})
    manager.delete_log("t", 0)
    assert read_checkpoint(dirs[0] / "replication-offset-checkpoint") == {}
    manager.get_or_create_log("t", 0)
    assert manager.high_watermarks() == {("t", 1): 4}
    manager.shutdown()


def test_leader_epochs_survive_a_log_manager_restart(dirs):
    manager = LogManager(dirs, CONFIG)
    log = manager.get_or_create_log("t", 0)
    append(log, batch(1), leader_epoch=0)
    append(log, batch(1), leader_epoch=2)
    manager.shutdown()
    restarted = LogManager(dirs, CONFIG)
    assert restarted.get_log("t", 0).end_offset_for_epoch(1) == (0, 1)
    restarted.shutdown()
