"""What the docker tests of the Kafka kinds share beside their clients: the kind itself,
skipped with the reason where set-up fetched no jars for it, and for the KRaft layouts
(combined nodes, dedicated controllers) the quorum as its leader describes it and the wait for
a new one — one place, so both layouts are read and judged alike."""

from __future__ import annotations

from typing import TypeVar

import pytest

from harness.cluster.docker.backend import DockerCluster
from harness.cluster.errors import PeerStartError
from harness.cluster.kinds import BrokerKind
from harness.cluster.kraft_state import KraftState, Quorum

FORMATTED = "Formatting metadata directory"  # what StorageTool prints for each dir it formats

K = TypeVar("K", bound=BrokerKind)


def with_jars(kind: K) -> K:
    """``kind``, or a skip naming why where set-up fetched none of its jars."""
    try:
        kind.version()
    except PeerStartError as exc:
        pytest.skip(str(exc))
    return kind


def quorum(cluster: DockerCluster) -> Quorum:
    """The quorum as its leader describes it, read on the voters' own listeners."""
    reads = cluster.reads
    assert isinstance(reads, KraftState)
    return reads.quorum()


def new_leader(cluster: DockerCluster, before: Quorum, timeout: float) -> Quorum:
    """The quorum once a voter other than ``before``'s leader leads it at a higher epoch."""
    old = before.leader_id
    return cluster.wait_for(
        lambda: q if (q := quorum(cluster)).leader_id not in (None, old)
        and q.leader_epoch > before.leader_epoch else None,
        timeout, f"a voter other than {old} to lead at an epoch above {before.leader_epoch}")
