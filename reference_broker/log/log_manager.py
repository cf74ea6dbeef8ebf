"""Every partition log on this broker, across its log dirs (Kafka's LogManager).

Start-up locks each log dir (a second broker on the same dir fails at once instead of corrupting
it), checks `meta.properties`, then loads every `<topic>-<partition>` directory with the recovery
point and log start offset from the dir's checkpoint files. If the previous run shut down cleanly
(the `.kafka_cleanshutdown` marker, written last by `shutdown`), every segment is trusted;
otherwise unflushed segments are recovered. The marker is removed once loading is done, so a
crash later in this run is never mistaken for a clean stop.

The server drives the periodic work on its own timers: `flush_dirty_logs` (flush.ms),
`cleanup_logs` (retention), `checkpoint_recovery_points` and, for replicated partitions,
`checkpoint_high_watermarks` (replica.high.watermark.checkpoint.interval.ms). High watermarks
are not the log's own state (the partition computes them from its followers), so the caller
hands them in; they are kept per log dir, in Kafka's `replication-offset-checkpoint`, next to
the logs they describe, and read back with `high_watermarks` when the broker starts.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from reference_broker.log.checkpoint_file import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    fsync_directory,
    read_checkpoint,
    write_checkpoint,
)
from reference_broker.log.errors import LogDirError
from reference_broker.log.log_config import Clock, LogConfig, wall_clock_ms
from reference_broker.log.topic_partition import (
    TopicPartition,
    parse_topic_partition,
    validate_topic,
)
from reference_broker.log.unified_log import UnifiedLog

logger = logging.getLogger("reference_broker.log")

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
META_PROPERTIES = "meta.properties"
DELETED_DIR_SUFFIX = "-delete"


class LogManager:
    def __init__(
        self,
        log_dirs: Sequence[Path | str],
        default_config: LogConfig,
        *,
        topic_configs: Mapping[str, LogConfig] | None = None,
        broker_id: int | None = None,
        cluster_id: str | None = None,
        now_ms: Clock = wall_clock_ms,
    ) -> None:
        """Lock the dirs and load every log found in them.

        `topic_configs` gives the config of each topic's logs at load (others get
        `default_config`); `broker_id` / `cluster_id`, when given, must match the ones recorded
        in meta.properties, which is written on first use.
        """
        self.log_dirs = [Path(d) for d in log_dirs]
        if not self.log_dirs:
            raise LogDirError("no log dirs configured")
        if len({d.resolve() for d in self.log_dirs}) != len(self.log_dirs):
            raise LogDirError(f"duplicate log dirs in {[str(d) for d in self.log_dirs]}")
        self.default_config = default_config
        self._topic_configs = dict(topic_configs or {})
        self._now_ms = now_ms
        self._locks: dict[Path, int] = {}
        self._logs: dict[TopicPartition, UnifiedLog] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        self._shut_down = False
        try:
            for log_dir in self.log_dirs:
                log_dir.mkdir(parents=True, exist_ok=True)
                self._lock(log_dir)
                _check_meta_properties(log_dir, broker_id, cluster_id)
            for log_dir in self.log_dirs:
                self._load_dir(log_dir)
        except BaseException:
            for log in self._logs.values():
                log.close()
            self._release_locks()
            raise

    # --- start-up ---------------------------------------------------------------------------

    def _lock(self, log_dir: Path) -> None:
        fd = os.open(log_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LogDirError(
                f"Failed to acquire lock on file {LOCK_FILE} in {log_dir}. A Kafka instance in "
                "another process or thread is using this directory."
            ) from None
        self._locks[log_dir] = fd

    def _release_locks(self) -> None:
        for fd in self._locks.values():
            os.close(fd)  # closing the descriptor drops the flock
        self._locks.clear()

    def _load_dir(self, log_dir: Path) -> None:
        marker = log_dir / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        recovery_points = read_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT)
        log_starts = read_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT)
        for child in sorted(log_dir.iterdir()):
            if not child.is_dir():
                continue
            if child.name.endswith(DELETED_DIR_SUFFIX):
                logger.info("removing %s, left by an interrupted topic deletion", child)
                shutil.rmtree(child, ignore_errors=True)
                continue
            try:
                topic_partition = parse_topic_partition(child.name)
            except ValueError:
                logger.warning("ignoring %s: not a partition directory", child)
                continue
            if topic_partition in self._logs:
                raise LogDirError(
                    f"duplicate log directories for {child.name}: "
                    f"{self._logs[topic_partition].directory} and {child}"
                )
            self._logs[topic_partition] = UnifiedLog.open(
                child,
                self._topic_configs.get(topic_partition.topic, self.default_config),
                recovery_point=recovery_points.get(topic_partition, 0),
                log_start_offset=log_starts.get(topic_partition, 0),
                had_clean_shutdown=clean,
                now_ms=self._now_ms,
            )
            self._dir_of[topic_partition] = log_dir
        logger.info(
            "loaded %d logs from %s (%s shutdown)",
            sum(1 for d in self._dir_of.values() if d == log_dir),
            log_dir,
            "clean" if clean else "unclean",
        )
        if clean:
            marker.unlink()
            fsync_directory(log_dir)

    # --- logs -------------------------------------------------------------------------------

    def get_log(self, topic: str, partition: int) -> UnifiedLog | None:
        return self._logs.get(TopicPartition(topic, partition))

    def get_or_create_log(
        self, topic: str, partition: int, config: LogConfig | None = None
    ) -> UnifiedLog:
        """The partition's log, created in the log dir with the fewest partitions if new. A
        given `config` becomes the topic's config, also for a log loaded at start-up."""
        topic_partition = TopicPartition(topic, partition)
        if config is not None:
            self._topic_configs[topic] = config
        existing = self._logs.get(topic_partition)
        if existing is not None:
            if config is not None and existing.config != config:
                existing.update_config(config)
            return existing
        validate_topic(topic)
        if partition < 0:
            raise ValueError(f"partition must be >= 0, got {partition}")
        log_dir = self._next_log_dir()
        log = UnifiedLog.open(
            log_dir / topic_partition.dir_name,
            self._topic_configs.get(topic, self.default_config),
            now_ms=self._now_ms,
        )
        fsync_directory(log_dir)
        self._logs[topic_partition] = log
        self._dir_of[topic_partition] = log_dir
        return log

    def _next_log_dir(self) -> Path:
        counts = dict.fromkeys(self.log_dirs, 0)
        for log_dir in self._dir_of.values():
            counts[log_dir] += 1
        return min(self.log_dirs, key=lambda d: counts[d])

    def delete_log(self, topic: str, partition: int) -> bool:
        """Remove a partition's log for good (DeleteTopics). Returns whether it existed.

        The directory is first renamed to `<name>.<n>-delete`, so a crash midway leaves a
        directory the next start-up removes, never a half-deleted log that would be loaded.
        """
        topic_partition = TopicPartition(topic, partition)
        log = self._logs.pop(topic_partition, None)
        if log is None:
            return False
        log_dir = self._dir_of.pop(topic_partition)
        log.delete()
        self._write_checkpoints(log_dir)
        high_watermarks = read_checkpoint(log_dir / REPLICATION_OFFSET_CHECKPOINT)
        if high_watermarks.pop(topic_partition, None) is not None:
            # a topic re-created under the same name must not inherit the old high watermark
            write_checkpoint(log_dir / REPLICATION_OFFSET_CHECKPOINT, high_watermarks)
        return True

    def update_config(self, topic: str, config: LogConfig) -> None:
        self._topic_configs[topic] = config
        for topic_partition, log in self._logs.items():
            if topic_partition.topic == topic:
                log.update_config(config)

    def all_logs(self) -> list[UnifiedLog]:
        return list(self._logs.values())

    # --- periodic work ----------------------------------------------------------------------

    def flush_dirty_logs(self, now_ms: int) -> int:
        """Flush the logs whose flush.ms has passed; returns how many were flushed."""
        flushed = 0
        for log in self._logs.values():
            if log.flush_due(now_ms):
                log.flush()
                flushed += 1
        return flushed

    def cleanup_logs(self, now_ms: int) -> int:
        """Apply retention to every log; returns the number of segments deleted."""
        return sum(log.delete_old_segments(now_ms) for log in self._logs.values())

    def checkpoint_recovery_points(self) -> None:
        """Record recovery points and log start offsets, bounding the next recovery."""
        for log_dir in self.log_dirs:
            self._write_checkpoints(log_dir)

    def _write_checkpoints(self, log_dir: Path) -> None:
        logs = {tp: log for tp, log in self._logs.items() if self._dir_of[tp] == log_dir}
        write_checkpoint(
            log_dir / RECOVERY_POINT_CHECKPOINT,
            {tp: log.recovery_point for tp, log in logs.items()},
        )
        write_checkpoint(
            log_dir / LOG_START_OFFSET_CHECKPOINT,
            {tp: log.log_start_offset for tp, log in logs.items()},
        )

    def checkpoint_high_watermarks(self, hws: Mapping[tuple[str, int], int]) -> None:
        """Write each log dir's `replication-offset-checkpoint` with the given high watermarks
        of the logs that live in it (entries for partitions without a log here are dropped)."""
        by_dir: dict[Path, dict[tuple[str, int], int]] = {d: {} for d in self.log_dirs}
        for key, high_watermark in hws.items():
            topic_partition = TopicPartition(*key)
            log_dir = self._dir_of.get(topic_partition)
            if log_dir is not None:
                by_dir[log_dir][topic_partition] = high_watermark
        for log_dir, offsets in by_dir.items():
            write_checkpoint(log_dir / REPLICATION_OFFSET_CHECKPOINT, offsets)

    def high_watermarks(self) -> dict[tuple[str, int], int]:
        """The checkpointed high watermarks of this broker's logs, each read from the log dir
        holding the log (a missing or damaged file reads as empty: the partition then starts
        from what its leader tells it, as after a first start)."""
        found: dict[tuple[str, int], int] = {}
        for log_dir in self.log_dirs:
            entries = read_checkpoint(log_dir / REPLICATION_OFFSET_CHECKPOINT)
            for key, high_watermark in entries.items():
                topic_partition = TopicPartition(*key)
                if self._dir_of.get(topic_partition) == log_dir:
                    found[topic_partition] = high_watermark
        return found

    def shutdown(self) -> None:
        """Flush and close every log, write checkpoints, mark the shutdown clean, unlock."""
        if self._shut_down:
            return
        self._shut_down = True
        clean = True
        for log in self._logs.values():
            try:
                log.close()
            except OSError:
                logger.exception("failed to close %s", log.directory)
                clean = False
        try:
            for log_dir in self.log_dirs:
                self._write_checkpoints(log_dir)
                if clean:
                    (log_dir / CLEAN_SHUTDOWN_FILE).touch()
                    fsync_directory(log_dir)
        finally:
            self._release_locks()


def read_properties(path: Path) -> dict[str, str]:
    """Java .properties as Kafka writes meta.properties: `key=value` lines, `#` comments."""
    properties = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if sep:
            properties[key.strip()] = value.strip()
    return properties


def _check_meta_properties(log_dir: Path, broker_id: int | None, cluster_id: str | None) -> None:
    path = log_dir / META_PROPERTIES
    expected = {
        "broker.id": None if broker_id is None else str(broker_id),
        "cluster.id": cluster_id,
    }
    if path.exists():
        try:
            found = read_properties(path)
        except (OSError, UnicodeDecodeError) as exc:
            raise LogDirError(f"cannot read {path}: {exc}") from None
        for key, value in expected.items():
            if value is not None and key in found and found[key] != value:
                raise LogDirError(
                    f"{key} {value} does not match {key} {found[key]} in {path}: the log dir "
                    "belongs to another broker or cluster"
                )
        if all(value is None or key in found for key, value in expected.items()):
            return
        properties = found | {k: v for k, v in expected.items() if v is not None}
    else:
        properties = {"version": "0"} | {k: v for k, v in expected.items() if v is not None}
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(
        "#\n" + "".join(f"{key}={value}\n" for key, value in properties.items()), encoding="utf-8"
    )
    with open(tmp, "rb+") as handle:
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    fsync_directory(log_dir)
