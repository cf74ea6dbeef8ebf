"""Controller failover in KRaft mode: the quorum's, not ZooKeeper's.

A KRaft cluster's controllers are the voters of a Raft quorum over the ``__cluster_metadata``
log (KIP-500, KIP-595). The active controller is the quorum's leader; an election raises the
leader epoch, which every request of the new leader carries and every voter keeps — the role
ZooKeeper's ``/controller_epoch`` played. A leader that loses a majority stops leading, and
nothing is committed without one. These tests fail the active controller two ways (a crash, and
a cut from every other node while it keeps running) and check the promises: another voter leads
at a higher epoch, the metadata moves on under it (a crashed node's partitions get new leaders,
topics are made), and the cut-off minority moves nowhere until it can fetch again.

The quorum is read as ``kafka-metadata-quorum describe`` reads it (DescribeQuorum on the voters'
own controller listeners); each node's metadata image from its own client listener, never
through the proxies a fault cuts.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest

from harness.cluster.kraft_state import KraftState, Quorum
from harness.cluster.targets import Target
from harness.waiting import wait_for

from .placement import (
    WAIT_S,
    Roles,
    create_placed_topic,
    roles,
    state_of,
    view_of,
    wait_for_state,
)

pytestmark = [pytest.mark.requires_quorum, pytest.mark.requires_process_faults,
              pytest.mark.requires_faults, pytest.mark.requires_multi_broker,
              pytest.mark.requires_create_topics]


def _quorum(cluster: Target) -> Quorum:
    reads = cluster.require_nodes().reads
    assert isinstance(reads, KraftState), "a target with a quorum is read by KraftState"
    return reads.quorum()


def _new_leader(cluster: Target, old: int, old_epoch: int, timeout: float) -> Quorum:
    """The quorum once a voter other than ``old`` leads it at an epoch above ``old_epoch``."""
    def elected() -> Quorum | None:
        quorum = _quorum(cluster)
        return quorum if quorum.leader_id not in (None, old) and \
            quorum.leader_epoch > old_epoch else None

    return wait_for(elected, timeout, f"a voter other than {old} to lead above epoch {old_epoch}")


def _failover_timeout_s(cluster: Target) -> float:
    """How long the controllers may take to fence a silent broker (broker.session.timeout.ms),
    with room for the election before it."""
    return cluster.require_nodes().spec.zookeeper_session_timeout_ms / 1000 + WAIT_S


def _fail_the_controller(request: pytest.FixtureRequest, cluster: Target, admin: Any,
                         fail: Callable[[int], object], what: str
                         ) -> tuple[Roles, str | None, dict[str, Any] | None]:
    """``fail`` the active controller's node once another voter leads at a higher epoch:
    the roles before, and — where that node is a broker too (combined nodes) — a topic placed
    to be led by it and its state once the leadership moved off the failed node at a higher
    leader epoch (None, None where the controllers are nodes of their own)."""
    who = roles(cluster)
    before = _quorum(cluster)
    assert before.leader_id == who.controller
    topic = (create_placed_topic(request, cluster, admin,
                                 [[who.controller, who.first, who.second]], prefix="led-")
             if who.colocated else None)
    placed = state_of(cluster, topic) if topic else None

    fail(who.controller)
    after = _new_leader(cluster, who.controller, before.leader_epoch, _failover_timeout_s(cluster))
    assert after.leader_id in {v.node_id for v in before.voters} - {who.controller}
    if topic is None or placed is None:
        return who, None, None
    moved = wait_for_state(cluster, topic, lambda s: s["leader"] in (who.first, who.second),
                           f"to move its leader off {what} node {who.controller}",
                           _failover_timeout_s(cluster))
    assert moved["leader_epoch"] > placed["leader_epoch"]
    return who, topic, moved


def test_a_crashed_active_controller_is_replaced_at_a_higher_epoch_and_metadata_goes_on(
        request: pytest.FixtureRequest, kafka_target: Target, kafka_admin: Any) -> None:
    """A crashed quorum leader is replaced by a voter at a higher epoch [KIP-595, leader election].

    The voters that stop hearing from the leader elect another one with epoch + 1 or more (an
    election may take more than one round). The new active controller then does what the old
    one would have: where the crashed node was a broker too, it fences it once its session
    lapses and elects new leaders for the partitions it led from their ISR (KRaft's
    ReplicationControlManager); and it commits new topics (KIP-500: metadata changes need the
    quorum, not the crashed node).
    """
    who, _, moved = _fail_the_controller(request, kafka_target, kafka_admin,
                                         kafka_target.require_nodes().kill, "crashed")
    if moved is not None:
        assert who.controller not in moved["isr"]
    made = create_placed_topic(request, kafka_target, kafka_admin,
                               [[who.first, who.second]], prefix="made-")
    assert state_of(kafka_target, made)["leader"] == who.first


def test_a_cut_off_active_controller_loses_the_lead_and_its_side_makes_no_progress(
        request: pytest.FixtureRequest, kafka_target: Target, kafka_admin: Any) -> None:
    """A leader cut from the majority is replaced; the minority commits nothing [KIP-595].

    The node keeps running and answering its clients, but it is alone: the voters that can
    hear each other elect one of them at a higher epoch and go on (on combined nodes they fence
    the cut-off broker and move the leadership of its partition), while the cut-off node can
    neither commit nor fetch what the majority commits — its own metadata image still shows the
    partition led by itself at the old leader epoch. After the heal it fetches the majority's
    log: its image shows the new leader; a dedicated controller is a voter with no lag again.
    """
    faults = kafka_target.require_faults()
    nodes = kafka_target.require_nodes()
    who, topic, moved = _fail_the_controller(
        request, kafka_target, kafka_admin,
        lambda node: faults.isolate(nodes.spec.node_name(node)), "cut-off")
    if topic is None or moved is None:  # a dedicated controller: the brokers follow the majority
        made = create_placed_topic(request, kafka_target, kafka_admin,
                                   [[who.first, who.second]], prefix="made-")
        assert state_of(kafka_target, made)["leader"] == who.first
        faults.heal()
        wait_for(lambda: next(v.lag for v in _quorum(kafka_target).voters
                              if v.node_id == who.controller) == 0,
                 _failover_timeout_s(kafka_target),
                 f"controller {who.controller} to catch up with the quorum after the heal")
        return

    stale = view_of(kafka_target, who.controller, topic)
    assert stale.leaders[0] == who.controller, (
        f"the cut-off node learnt of a leader it cannot have heard of: {stale}")
    def serves_new_leader(node: int) -> bool:
        return view_of(kafka_target, node, topic).leaders.get(0) == moved["leader"]

    for node in (who.first, who.second):
        wait_for(functools.partial(serves_new_leader, node), WAIT_S,
                 f"node {node} (majority side) to serve {topic}-0's new leader")

    faults.heal()
    wait_for(lambda: view_of(kafka_target, who.controller, topic).leaders.get(0)
             == state_of(kafka_target, topic)["leader"], _failover_timeout_s(kafka_target),
             f"node {who.controller} to catch up with the quorum after the heal")
