"""Collect the controller's decisions of one event into LeaderAndIsr / UpdateMetadata /
StopReplica request bodies, one of each per broker (Kafka's ``ControllerBrokerRequestBatch``).

An event handler adds what changed; :meth:`ControllerBrokerRequestBatch.requests` then builds
plain dict bodies with the field names of LeaderAndIsr v4, UpdateMetadata v6 and StopReplica v3,
each carrying the controller's id and epoch and the *target* broker's epoch, so a broker that
restarted (new epoch) rejects requests meant for its previous incarnation. Pure: reads the
context, does no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from reference_broker.controller.controller_context import ControllerContext
from reference_broker.log.topic_partition import TopicPartition
from reference_broker.zk.broker_znodes import BrokerInfo, EndPoint

LEADER_AND_ISR = 4
STOP_REPLICA = 5
UPDATE_METADATA = 6
LEADER_AND_ISR_VERSION = 4
STOP_REPLICA_VERSION = 3
UPDATE_METADATA_VERSION = 6

# UpdateMetadata names a partition of a topic being deleted with this leader, so brokers
# drop it from their metadata; StopReplica for deletion carries this leader epoch.
LEADER_DURING_DELETE = -2
EPOCH_DURING_DELETE = -2

SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


@dataclass(frozen=True)
class BrokerRequest:
    """One request for one broker. ``deleted_partitions`` lists the partitions a StopReplica
    deletes, so the controller can track topic deletion from the response."""

    broker_id: int
    api_key: int
    version: int
    body: dict[str, Any]
    deleted_partitions: tuple[TopicPartition, ...] = ()


def inter_broker_endpoint(info: BrokerInfo, listener_name: str | None) -> EndPoint:
    """The registered endpoint brokers talk to each other on: the named listener, else the
    first one."""
    for endpoint in info.endpoints:
        if listener_name is None or endpoint.listener_name == listener_name:
            return endpoint
    if not info.endpoints:
        raise ValueError(f"broker {info.broker_id} registered no endpoints")
    return info.endpoints[0]


def _group_by_topic(entries: dict[TopicPartition, dict[str, Any]], key: str
                    ) -> list[dict[str, Any]]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for tp in sorted(entries):
        topics.setdefault(tp.topic, []).append(entries[tp])
    return [{"topic_name": topic, key: states} for topic, states in topics.items()]


@dataclass
class ControllerBrokerRequestBatch:
    controller_id: int
    context: ControllerContext
    inter_broker_listener: str | None = None
    _leader_and_isr: dict[int, dict[TopicPartition, dict[str, Any]]] = field(default_factory=dict)
    _update_metadata_brokers: set[int] = field(default_factory=set)
    _update_metadata_partitions: set[TopicPartition] = field(default_factory=set)
    _stop_replica: dict[int, dict[TopicPartition, dict[str, Any]]] = field(default_factory=dict)

    def add_leader_and_isr(self, broker_ids: Iterable[int], tp: TopicPartition, *,
                           is_new: bool = False) -> None:
        """Tell ``broker_ids`` (live ones only) the partition's current state, and every
        live broker its new metadata."""
        state = self.context.partition_states.get(tp)
        if state is None:
            return
        assignment = self.context.assignments.get(tp)
        replicas = assignment.replicas if assignment else ()
        entry = {
            "partition_index": tp.partition,
            "controller_epoch": state.controller_epoch,
            "leader": state.leader,
            "leader_epoch": state.leader_epoch,
            "isr": list(state.isr),
            "zk_version": self.context.partition_zk_versions.get(tp, 0),
            "replicas": list(replicas),
            "adding_replicas": list(assignment.adding_replicas) if assignment else [],
            "removing_replicas": list(assignment.removing_replicas) if assignment else [],
            "is_new": is_new,
        }
        for broker_id in broker_ids:
            if broker_id in self.context.live_brokers:
                self._leader_and_isr.setdefault(broker_id, {})[tp] = entry
        self.add_update_metadata(self.context.live_brokers, [tp])

    def add_update_metadata(self, broker_ids: Iterable[int],
                            partitions: Iterable[TopicPartition] = ()) -> None:
        self._update_metadata_brokers.update(
            b for b in broker_ids if b in self.context.live_brokers)
        self._update_metadata_partitions.update(partitions)

    def add_stop_replica(self, broker_ids: Iterable[int], tp: TopicPartition, *,
                         delete_partition: bool, leader_epoch: int) -> None:
        entry = {"partition_index": tp.partition, "leader_epoch": leader_epoch,
                 "delete_partition": delete_partition}
        for broker_id in broker_ids:
            if broker_id in self.context.live_brokers:
                self._stop_replica.setdefault(broker_id, {})[tp] = entry

    def is_empty(self) -> bool:
        return not (self._leader_and_isr or self._update_metadata_brokers or self._stop_replica)

    def requests(self) -> list[BrokerRequest]:
        """LeaderAndIsr first, then UpdateMetadata, then StopReplica, as Kafka sends them."""
        ctx = self.context
        result = []
        for broker_id, entries in sorted(self._leader_and_isr.items()):
            leaders = sorted({e["leader"] for e in entries.values()} & set(ctx.live_brokers))
            live_leaders = []
            for leader in leaders:
                endpoint = inter_broker_endpoint(ctx.live_brokers[leader],
                                                 self.inter_broker_listener)
                live_leaders.append({"broker_id": leader, "host_name": endpoint.host,
                                     "port": endpoint.port})
            body = self._header(broker_id) | {
                "topic_states": _group_by_topic(entries, "partition_states"),
                "live_leaders": live_leaders,
            }
            result.append(BrokerRequest(broker_id, LEADER_AND_ISR, LEADER_AND_ISR_VERSION, body))
        if self._update_metadata_brokers:
            metadata = self._update_metadata_states()
            live = [self._live_broker(info) for _, info in sorted(ctx.live_brokers.items())]
            for broker_id in sorted(self._update_metadata_brokers):
                body = self._header(broker_id) | {"topic_states": metadata, "live_brokers": live}
                result.append(BrokerRequest(broker_id, UPDATE_METADATA, UPDATE_METADATA_VERSION,
                                            body))
        for broker_id, entries in sorted(self._stop_replica.items()):
            body = self._header(broker_id) | {
                "topic_states": _group_by_topic(entries, "partition_states")}
            deleted = tuple(tp for tp, e in sorted(entries.items()) if e["delete_partition"])
            result.append(BrokerRequest(broker_id, STOP_REPLICA, STOP_REPLICA_VERSION, body,
                                        deleted))
        return result

    def _header(self, broker_id: int) -> dict[str, Any]:
        return {"controller_id": self.controller_id, "controller_epoch": self.context.epoch,
                "broker_epoch": self.context.broker_epochs.get(broker_id, -1)}

    def _update_metadata_states(self) -> list[dict[str, Any]]:
        ctx = self.context
        entries = {}
        for tp in self._update_metadata_partitions:
            state = ctx.partition_states.get(tp)
            if state is None:
                continue
            replicas = ctx.replicas(tp)
            deleting = tp.topic in ctx.topics_to_delete
            entries[tp] = {
                "partition_index": tp.partition,
                "controller_epoch": state.controller_epoch,
                "leader": LEADER_DURING_DELETE if deleting else state.leader,
                "leader_epoch": state.leader_epoch,
                "isr": list(state.isr),
                "zk_version": ctx.partition_zk_versions.get(tp, 0),
                "replicas": list(replicas),
                "offline_replicas": [r for r in replicas if r not in ctx.live_brokers],
            }
        return _group_by_topic(entries, "partition_states")

    @staticmethod
    def _live_broker(info: BrokerInfo) -> dict[str, Any]:
        return {
            "id": info.broker_id,
            "endpoints": [
                {"port": ep.port, "host": ep.host, "listener": ep.listener_name,
                 "security_protocol": SECURITY_PROTOCOL_IDS.get(ep.security_protocol, 0)}
                for ep in info.endpoints
            ],
            "rack": info.rack,
        }
