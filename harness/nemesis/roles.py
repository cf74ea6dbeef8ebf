"""Role targets: a fault named for what a node does, resolved to the node that does it now.

A fault on "the controller" or "the leader of orders/0" means whichever broker holds that role
when the fault is applied — it moves with every fault — so a role is resolved then, from the
cluster's own state, never from a client's opinion:

* ``controller`` — ZooKeeper's ``/controller``, or the KRaft quorum's active leader;
* ``leader:TOPIC/PARTITION`` — the partition's leader (``leader of TOPIC-PARTITION``, the
  schedules' older spelling, still reads);
* ``coordinator:GROUP`` — the broker FindCoordinator names for the group, asked of a running
  broker on its own listener;
* ``txn-coordinator:TRANSACTIONAL_ID`` — the transaction coordinator of a transactional id: the
  leader of its ``__transaction_state`` partition, as FindCoordinator names it (the broker
  whose fault tests what exactly-once rests on);
* ``txn-coordinator`` alone — the transaction coordinator of one of a run's transactional
  clients. Their ids are made when each client process starts, so a schedule written before
  the run cannot name one: the run's nemesis picks a running client's id when it applies the
  fault (:func:`for_transactional_id`) and resolves that. A shell, which knows no clients, is
  told to name the id.

The same names serve the shell (``kafka-harness kill controller``) and the seeded schedules
(:mod:`harness.nemesis.schedule`), so a role means one thing wherever it is written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from harness.cluster.nodes import ClusterNodes
from harness.raw_client import RawClient
from harness.wire.errors import ErrorCode

FIND_COORDINATOR, FIND_COORDINATOR_VERSION = 10, 3
_TIMEOUT_S = 10.0


class RoleKind(StrEnum):
    CONTROLLER = "controller"
    LEADER = "leader"
    COORDINATOR = "coordinator"
    TXN_COORDINATOR = "txn-coordinator"


# FindCoordinator's key types: what a coordinator role's key names.
_KEY_TYPES = {RoleKind.COORDINATOR: 0, RoleKind.TXN_COORDINATOR: 1}
_KEY_NAMES = {RoleKind.COORDINATOR: ("GROUP", "a consumer group"),
              RoleKind.TXN_COORDINATOR: ("TRANSACTIONAL_ID", "a transactional id")}


@dataclass(frozen=True)
class Role:
    kind: RoleKind
    topic: str = ""
    partition: int = 0
    group: str = ""  # the consumer group, or the transactional id, of a coordinator role

    def __str__(self) -> str:
        if self.kind is RoleKind.LEADER:
            return f"leader:{self.topic}/{self.partition}"
        if self.kind in _KEY_TYPES and self.group:
            return f"{self.kind}:{self.group}"
        return self.kind.value


class NoHolder(RuntimeError):
    """No broker holds the role now (no controller elected, a partition without a leader)."""


_LEADER = re.compile(r"leader:(?P<topic>.+)/(?P<partition>\d+)")
_LEADER_OF = re.compile(r"leader of (?P<topic>.+)-(?P<partition>\d+)")


def parse_role(target: str) -> Role | None:
    """The role a fault target names, None for a node name; ValueError for a role spelt
    wrong (``leader:orders``), naming the forms there are."""
    if target in (RoleKind.CONTROLLER, RoleKind.TXN_COORDINATOR):
        return Role(RoleKind(target))
    kind, colon, key = target.partition(":")
    if colon and kind in _KEY_TYPES:
        role = RoleKind(kind)
        if not key:
            spelling, meaning = _KEY_NAMES[role]
            raise ValueError(f"{role}:{spelling} names {meaning}")
        return Role(role, group=key)
    match = _LEADER.fullmatch(target) or _LEADER_OF.fullmatch(target)
    if match:
        return Role(RoleKind.LEADER, match["topic"], int(match["partition"]))
    if target.startswith(f"{RoleKind.LEADER}:"):
        raise ValueError(f"{target!r}: a leader is named leader:TOPIC/PARTITION")
    return None


def for_transactional_id(role: Role, txn_id: str) -> Role:
    """The keyless ``txn-coordinator`` role bound to one client's transactional id; any other
    role as it is."""
    if role.kind is RoleKind.TXN_COORDINATOR and not role.group:
        return Role(RoleKind.TXN_COORDINATOR, group=txn_id)
    return role


def holder(cluster: ClusterNodes, role: Role) -> int:
    """The node id that holds ``role`` now; :class:`NoHolder` when none does, or when the
    role is the keyless ``txn-coordinator``, which names no id to ask about."""
    if role.kind is RoleKind.TXN_COORDINATOR and not role.group:
        raise NoHolder(f"{role} names a run's transactional client, chosen by the run's "
                       f"nemesis; name the id: {role}:TRANSACTIONAL_ID")
    if role.kind is RoleKind.CONTROLLER:
        broker = cluster.controller_id()
    elif role.kind is RoleKind.LEADER:
        broker = cluster.leader(role.topic, role.partition)
    else:
        broker = _coordinator(cluster, role.group, _KEY_TYPES[role.kind])
    if broker is None or broker < 0:
        raise NoHolder(f"no broker is {role} now")
    return broker


def resolve(cluster: ClusterNodes, target: str) -> str:
    """The node a fault target means now: itself, or the node holding the role it names
    (``broker-N``, or on a KRaft cluster with dedicated controllers ``controller-N``)."""
    role = parse_role(target)
    return target if role is None else cluster.spec.node_name(holder(cluster, role))


def _coordinator(cluster: ClusterNodes, key: str, key_type: int) -> int | None:
    """FindCoordinator for a group or transactional id, asked of the running brokers on their
    own listeners, the first that answers it (the offsets or transaction state topic may still
    be being made: then nobody)."""
    for broker_id in cluster.running_broker_ids():
        if broker_id in cluster.paused:
            continue
        node = cluster.broker(broker_id)
        if node.port is None:
            continue
        try:
            with RawClient(node.host, node.port, timeout=_TIMEOUT_S,
                           client_id="kafka-harness-roles") as client:
                answer = client.request(FIND_COORDINATOR, FIND_COORDINATOR_VERSION,
                                        {"key": key, "key_type": key_type})
        except OSError:
            continue
        if answer.error_code == ErrorCode.none:
            return int(answer.node_id)
    return None
