"""Process faults: kill -9, pause, resume, graceful stop, restart and lose-unflushed.

The first five are signals a :class:`~harness.cluster.local.LocalCluster` already knows how to
send; this module only maps the node names everyone uses (``zk``, ``broker-1`` …) onto them,
so the CLI, the supervisor and the nemesis schedule say the same thing the same way.

lose-unflushed is the fault Jepsen simulates with lazyfs: the machine loses power, so every
write the broker had not fsynced is gone. A killed process keeps its page cache (the kernel
still writes it out), so the fault is reproduced by file surgery on the stopped broker's log
dir instead: each partition log is cut back to the recovery point the broker last recorded in
``recovery-point-offset-checkpoint`` — the offset below which it had fsynced everything. What
the broker then finds on start-up is what a real crash could leave: whole batches up to that
point, no index entries for what is gone, and no producer snapshot describing lost batches.

The harness never imports the broker, so the checkpoint format and the segment file names are
read here from their documented shape (Kafka's), not from the broker's code.
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.cluster.nodes import ClusterNodes
from harness.wire.records import HEADER_SIZE, LOG_OVERHEAD, read_header

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOG_SUFFIX = ".log"
INDEX_SUFFIXES = (".index", ".timeindex")
SNAPSHOT_SUFFIX = ".snapshot"
_OFFSET_FILE = re.compile(r"^(\d{20})(\.[a-z]+)$")
_PARTITION_DIR = re.compile(r"^(.+)-(\d+)$")
_CHECKPOINT_VERSION = 0


class UnknownNode(ValueError):
    """A node name that does not name a process of this cluster (a usage error)."""


class FaultFailed(RuntimeError):
    """The fault could not be applied (e.g. resuming a node that is not running)."""


# --- lose-unflushed: the file surgery ----------------------------------------------------------


@dataclass
class PartitionCut:
    """What lose-unflushed did to one partition log."""

    recovery_point: int
    log_end_before: int
    log_end_after: int
    bytes_cut: int = 0
    segments_deleted: list[int] = field(default_factory=list)
    snapshots_deleted: list[int] = field(default_factory=list)

    @property
    def offsets_lost(self) -> int:
        return self.log_end_before - self.log_end_after


def read_recovery_points(path: Path) -> dict[tuple[str, int], int]:
    """Kafka's offset checkpoint text: version line, count line, ``topic partition offset``.

    A missing file means the broker never recorded a recovery point: nothing was known to be
    flushed. So does an empty one: Apache Kafka creates the file empty at start-up and writes
    the first checkpoint only after ``log.flush.offset.checkpoint.interval.ms`` (a minute), and
    reads an empty file as no entries. A damaged one is an error here (the broker would
    silently recover everything, but a fault that cannot say what it cut is no use to a test).
    """
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return {}
    if not lines:
        return {}
    if len(lines) < 2 or lines[0].strip() != str(_CHECKPOINT_VERSION):
        raise ValueError(f"{path}: not a version {_CHECKPOINT_VERSION} offset checkpoint")
    count = int(lines[1])
    entries = [line for line in lines[2:] if line.strip()]
    if len(entries) != count:
        raise ValueError(f"{path}: header says {count} entries, found {len(entries)}")
    points: dict[tuple[str, int], int] = {}
    for line in entries:
        topic, partition, offset = line.split(" ")
        points[(topic, int(partition))] = int(offset)
    return points


def lose_unflushed(data_dir: Path | str) -> dict[str, dict[str, Any]]:
    """Cut every partition log in the stopped broker's log dir back to its recovery point.

    Per partition: segments starting after the recovery point are deleted; the segment holding
    it is truncated at the first batch not wholly below it (batches are never split) and its
    ``.index``/``.timeindex`` removed so the broker rebuilds them; producer snapshots taken
    beyond the new log end are removed. A partition without a checkpoint entry has recovery
    point 0. Returns ``{"<topic>-<partition>": {...what was cut...}}``.

    The broker must not be running: a live broker would keep appending to the files.
    """
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise FileNotFoundError(f"{data_dir} is not a log dir")
    recovery_points = read_recovery_points(data_dir / RECOVERY_POINT_CHECKPOINT)
    report: dict[str, dict[str, Any]] = {}
    for child in sorted(data_dir.iterdir()):
        match = _PARTITION_DIR.match(child.name)
        if not child.is_dir() or match is None or child.name.endswith("-delete"):
            continue
        key = (match.group(1), int(match.group(2)))
        cut = _cut_partition(child, recovery_points.get(key, 0))
        report[child.name] = {**asdict(cut), "offsets_lost": cut.offsets_lost}
    return report


def _offset_files(directory: Path, suffix: str) -> list[int]:
    found = []
    for path in directory.iterdir():
        match = _OFFSET_FILE.match(path.name)
        if match is not None and match.group(2) == suffix:
            found.append(int(match.group(1)))
    return sorted(found)


def _file_name(offset: int, suffix: str) -> str:
    return f"{offset:020d}{suffix}"


def _batch_ends(path: Path) -> list[tuple[int, int]]:
    """``(next_offset, end_position)`` after each complete batch of a segment file, read
    header by header (a torn tail ends the walk, as it ends the broker's recovery)."""
    ends: list[tuple[int, int]] = []
    with open(path, "rb") as segment:
        size = os.fstat(segment.fileno()).st_size
        position = 0
        while position + HEADER_SIZE <= size:
            header = read_header(os.pread(segment.fileno(), HEADER_SIZE, position))
            if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or position + header.size > size:
                break
            position += header.size
            ends.append((header.next_offset, position))
    return ends


def _cut_partition(directory: Path, recovery_point: int) -> PartitionCut:
    bases = _offset_files(directory, LOG_SUFFIX)
    if not bases:
        return PartitionCut(recovery_point, recovery_point, recovery_point)
    last_ends = _batch_ends(directory / _file_name(bases[-1], LOG_SUFFIX))
    log_end_before = last_ends[-1][0] if last_ends else bases[-1]
    # The segment holding the recovery point is the last one starting at or below it; a
    # recovery point below the first segment (its data was deleted) cuts into the first one.
    kept = [base for base in bases if base <= recovery_point] or bases[:1]
    cut = PartitionCut(recovery_point, log_end_before, log_end_before)
    for base in bases[len(kept):]:
        cut.bytes_cut += (directory / _file_name(base, LOG_SUFFIX)).stat().st_size
        for suffix in (LOG_SUFFIX, *INDEX_SUFFIXES):
            (directory / _file_name(base, suffix)).unlink(missing_ok=True)
        cut.segments_deleted.append(base)
    holder = kept[-1]
    holder_path = directory / _file_name(holder, LOG_SUFFIX)
    ends = last_ends if holder == bases[-1] else _batch_ends(holder_path)
    keep_bytes, new_end = 0, holder
    for next_offset, end_position in ends:
        if next_offset > recovery_point:
            break
        keep_bytes, new_end = end_position, next_offset
    size_before = holder_path.stat().st_size
    if size_before != keep_bytes:
        with open(holder_path, "r+b") as segment:
            segment.truncate(keep_bytes)
            os.fsync(segment.fileno())
        for suffix in INDEX_SUFFIXES:
            (directory / _file_name(holder, suffix)).unlink(missing_ok=True)
    cut.bytes_cut += size_before - keep_bytes
    cut.log_end_after = new_end
    for offset in _offset_files(directory, SNAPSHOT_SUFFIX):
        if offset > new_end:
            (directory / _file_name(offset, SNAPSHOT_SUFFIX)).unlink(missing_ok=True)
            cut.snapshots_deleted.append(offset)
    _fsync_directory(directory)
    return cut


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# --- process faults on a LocalCluster's nodes --------------------------------------------------


def process_nodes(cluster: ClusterNodes) -> list[str]:
    """The nodes that are processes: ``zk`` where there is one, ``broker-1`` … ``broker-N``
    and a KRaft cluster's dedicated controllers (``controller-<id>``)."""
    zookeeper = ["zk"] if cluster.kind.needs_zookeeper else []
    return zookeeper + [cluster.spec.node_name(node_id) for node_id in cluster.spec.node_ids]


def broker_id_of(cluster: ClusterNodes, node: str) -> int | None:
    """The node id a node name means (a broker's or a dedicated controller's), None for
    ``zk``; :class:`UnknownNode` otherwise."""
    if node == "zk":
        return None
    match = re.fullmatch(r"(?:broker|controller)-(\d+)", node)
    if match is not None and int(match.group(1)) in cluster.spec.node_ids \
            and cluster.spec.node_name(int(match.group(1))) == node:
        return int(match.group(1))
    if node == "client":
        raise UnknownNode("client is not a process of the cluster: process faults apply to "
                          f"{', '.join(process_nodes(cluster))}")
    raise UnknownNode(f"unknown node {node!r}; nodes are {', '.join(process_nodes(cluster))}")


def kill(cluster: ClusterNodes, node: str) -> dict[str, Any]:
    """SIGKILL the node (a crash)."""
    broker_id = broker_id_of(cluster, node)
    code = _zookeeper(cluster).kill() if broker_id is None else cluster.kill(broker_id)
    return {"node": node, "exit_code": code}


def pause(cluster: ClusterNodes, node: str) -> dict[str, Any]:
    """SIGSTOP the node: it hangs with its connections open."""
    broker_id = broker_id_of(cluster, node)
    try:
        if broker_id is None:
            _zookeeper(cluster).pause()
        else:
            cluster.pause(broker_id)
    except RuntimeError as exc:
        raise FaultFailed(f"cannot pause {node}: {exc}") from exc
    return {"node": node}


def resume(cluster: ClusterNodes, node: str) -> dict[str, Any]:
    """SIGCONT after :func:`pause`."""
    broker_id = broker_id_of(cluster, node)
    try:
        if broker_id is None:
            _zookeeper(cluster).resume()
        else:
            cluster.resume(broker_id)
    except RuntimeError as exc:
        raise FaultFailed(f"cannot resume {node}: {exc}") from exc
    return {"node": node}


def stop(cluster: ClusterNodes, node: str) -> dict[str, Any]:
    """SIGTERM: a graceful stop (the broker's controlled shutdown)."""
    broker_id = broker_id_of(cluster, node)
    code = _zookeeper(cluster).stop() if broker_id is None else cluster.stop_broker(broker_id)
    return {"node": node, "exit_code": code}


def restart(cluster: ClusterNodes, node: str) -> dict[str, Any]:
    """Gracefully stop the node if it runs, then start it again on the same port and data.

    A broker restart returns once the broker is registered again and serves Metadata (after
    a kill, that includes waiting for ZooKeeper to expire its old session)."""
    broker_id = broker_id_of(cluster, node)
    try:
        if broker_id is None:
            zookeeper = _zookeeper(cluster)
            if zookeeper.is_running():
                zookeeper.stop()
            zookeeper.start()
            return {"node": node, "pid": zookeeper.pid}
        if cluster.broker(broker_id).is_running():
            cluster.stop_broker(broker_id)
        cluster.start_broker(broker_id)
    except (RuntimeError, TimeoutError) as exc:
        raise FaultFailed(f"cannot restart {node}: {exc}") from exc
    return {"node": node, "pid": cluster.broker(broker_id).pid}


def lose_unflushed_node(cluster: ClusterNodes, node: str) -> dict[str, Any]:
    """SIGKILL a broker, cut its logs back to their recovery points, start it again."""
    broker_id = broker_id_of(cluster, node)
    if broker_id is None:
        raise UnknownNode("lose-unflushed applies to brokers, not zk")
    broker = cluster.broker(broker_id)
    cluster.kill(broker_id)
    try:
        cut = lose_unflushed(broker.data_dir)
    except (OSError, ValueError) as exc:
        raise FaultFailed(f"{node} was killed but its logs could not be cut: {exc}") from exc
    try:
        cluster.start_broker(broker_id)
    except (RuntimeError, TimeoutError) as exc:
        raise FaultFailed(f"{node}'s logs were cut but it did not start again: {exc}") from exc
    return {
        "node": node,
        "pid": broker.pid,
        "partitions": cut,
        "offsets_lost": sum(entry["offsets_lost"] for entry in cut.values()),
    }


ACTIONS = {
    "kill": kill,
    "pause": pause,
    "resume": resume,
    "stop": stop,
    "restart": restart,
    "lose_unflushed": lose_unflushed_node,
}


def apply(cluster: ClusterNodes, action: str, node: str) -> dict[str, Any]:
    """Run one of :data:`ACTIONS` by name (what a schedule or a control request names)."""
    try:
        fault = ACTIONS[action]
    except KeyError:
        raise ValueError(f"unknown process fault {action!r}; faults are "
                         f"{', '.join(ACTIONS)}") from None
    return fault(cluster, node)


def _zookeeper(cluster: ClusterNodes):
    if cluster.zookeeper is None:
        raise FaultFailed("the cluster has not been started")
    return cluster.zookeeper
