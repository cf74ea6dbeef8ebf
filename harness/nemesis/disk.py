"""Disk faults on a running cluster's brokers, by node name: what the nemesis, the supervisor
(``kafka-harness disk ...``) and the tests call.

A cluster has disks when it was started with a disk layer (``ClusterSpec.disk``); the local
backend keeps them in ``LocalCluster.disks`` by broker id. A healed disk does not by itself
bring back a broker that halted on it — Apache Kafka in ZooKeeper mode halts when its only log
dir fails — so the heal starts such a broker again, as the heal of ``kill`` does. A KRaft broker
(Kafka 4.x, KIP-858) does not halt: it keeps running with the log dir offline, serving none of
its replicas, and a dir once offline stays so until the broker restarts (measured on 4.4 with a
full disk; DescribeLogDirs answers KAFKA_STORAGE_ERROR for it). The heal restarts that broker
too, so that after a heal every broker serves its replicas again on every kind.
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.cluster.nodes import ClusterNodes
from harness.disk.broker_disk import BrokerDisk, DiskFault, DiskLayer
from harness.nemesis.process import broker_id_of
from harness.raw_client import RawClient
from harness.wire.errors import ErrorCode

DESCRIBE_LOG_DIRS, DESCRIBE_LOG_DIRS_VERSION = 35, 4
_ASK_TIMEOUT_S = 10.0
DISK_ERROR_RATE = 0.5
"""The error rate of the nemesis's ``disk-errors`` and of ``disk errors`` without ``--rate``."""

NEMESIS_FAULTS: Mapping[str, DiskFault] = {"disk-full": DiskFault.FULL,
                                           "disk-errors": DiskFault.ERRORS}


def layer_for(faults: tuple[str, ...] | list[str]) -> DiskLayer:
    """The disk layer a run's nemesis faults need: FUSE only when errors are asked for (every
    read and write then crosses a user-space filesystem), a tmpfs when only fullness is."""
    if "disk-errors" in faults:
        return DiskLayer.FAULTY
    if "disk-full" in faults:
        return DiskLayer.LIMITED
    return DiskLayer.NONE


def disks_of(cluster: ClusterNodes) -> Mapping[int, BrokerDisk]:
    """The cluster's broker disks by id; empty for a cluster without (or a backend without)."""
    disks: Mapping[int, BrokerDisk] = getattr(cluster, "disks", {})
    return disks


def disk_unsupported(cluster: ClusterNodes, fault: str) -> str | None:
    """Why ``fault`` (a nemesis disk fault name) cannot be done on this cluster, or None."""
    disks = disks_of(cluster)
    if not disks:
        return "the cluster's brokers have no disk of the harness's (start it with --disk)"
    if NEMESIS_FAULTS[fault] is DiskFault.ERRORS and any(
            d.layer is not DiskLayer.FAULTY for d in disks.values()):
        return "disk errors need the faulty disk layer (--disk faulty)"
    return None


def _disk(cluster: ClusterNodes, node: str) -> tuple[int, BrokerDisk]:
    broker_id = broker_id_of(cluster, node)
    if broker_id is None:
        raise ValueError("disk faults apply to brokers, not to ZooKeeper")
    disks = disks_of(cluster)
    if broker_id not in disks:
        raise ValueError(f"{node} has no disk of the harness's (start the cluster with "
                         "--disk limited or --disk faulty)")
    return broker_id, disks[broker_id]


def apply_disk_fault(cluster: ClusterNodes, fault: str | DiskFault, node: str,
                     rate: float = DISK_ERROR_RATE) -> str:
    """Fill ``node``'s disk, or make its reads and writes fail at ``rate``; what was done."""
    what = NEMESIS_FAULTS[fault] if fault in NEMESIS_FAULTS else DiskFault(fault)
    _, disk = _disk(cluster, node)
    if what is DiskFault.FULL:
        ballast = disk.fill()
        return f"{node}'s disk full ({ballast // (1 << 20)} MiB of ballast)"
    if what is DiskFault.ERRORS:
        disk.set_error_rate(rate)
        return f"{node}'s reads and writes fail with EIO at rate {rate}"
    raise ValueError(f"{fault!r} is a heal, not a disk fault")


def heal_disk(cluster: ClusterNodes, node: str, *, restart: bool = True) -> str:
    """Free ``node``'s disk and stop its errors; with ``restart``, start the broker again if it
    halted meanwhile."""
    broker_id, disk = _disk(cluster, node)
    disk.heal()
    broker = cluster.broker(broker_id)
    if restart and not broker.is_running():
        code = cluster.stop_broker(broker_id)  # reaps it: the exit code it stopped with
        cluster.start_broker(broker_id)
        return (f"{node}'s disk healed; {node} had stopped (exit code {code}) and was started "
                "again")
    if restart and broker_id not in cluster.paused and _log_dir_offline(cluster, broker_id):
        cluster.stop_broker(broker_id)
        cluster.start_broker(broker_id)
        return (f"{node}'s disk healed; {node} had taken its log dir offline and was restarted "
                "to serve it again")
    return f"{node}'s disk healed"


def _log_dir_offline(cluster: ClusterNodes, broker_id: int) -> bool:
    """Whether the running broker says one of its log dirs failed (DescribeLogDirs, asked on its
    own listener: KAFKA_STORAGE_ERROR); False when it does not answer the API."""
    broker = cluster.broker(broker_id)
    if broker.port is None:
        return False
    try:
        with RawClient(broker.host, broker.port, timeout=_ASK_TIMEOUT_S,
                       client_id="kafka-harness-disk") as client:
            if DESCRIBE_LOG_DIRS_VERSION not in range(*_versions(client)):
                return False
            answer = client.request(DESCRIBE_LOG_DIRS, DESCRIBE_LOG_DIRS_VERSION,
                                    {"topics": None})
    except OSError:
        return False
    return any(result.error_code == ErrorCode.kafka_storage_error for result in answer.results)


def _versions(client: RawClient) -> tuple[int, int]:
    """The DescribeLogDirs versions the broker offers as a half-open range (empty if none)."""
    offered = client.advertised().get(DESCRIBE_LOG_DIRS)
    return (offered[0], offered[1] + 1) if offered else (0, 0)
