"""What the KRaft cluster tests share: the quorum as its leader describes it, one broker's own
metadata image, and the reset that leaves a module's cluster whole between tests."""

from __future__ import annotations

from harness.cluster.kraft_state import KraftState, Quorum
from harness.cluster.nodes import ClusterNodes
from harness.cluster.targets import Target
from harness.raw_client import raw_metadata

WAIT_S = 60


def describe_quorum(nodes: ClusterNodes) -> Quorum:
    reads = nodes.reads
    assert isinstance(reads, KraftState)
    return reads.quorum()


def brokers_seen_by(nodes: ClusterNodes, node: int) -> set[int]:
    """The brokers node ``node``'s own metadata image lists (unfenced ones)."""
    broker = nodes.broker(node)
    assert broker.port is not None
    return {b.node_id for b in raw_metadata(broker.host, broker.port, [], timeout=10).brokers}


def reset_whole(target: Target) -> None:
    """Heal, restart what is down, and wait until every voter has caught up with the leader."""
    target.reset()
    nodes = target.require_nodes()
    nodes.wait_for(lambda: (q := describe_quorum(nodes)).leader_id is not None
                   and all(v.lag == 0 for v in q.voters), WAIT_S,
                   "every voter caught up with the quorum's leader")
