"""The state of a KRaft cluster, read from the protocol itself: the quorum from DescribeQuorum,
registrations, leaders, ISR and (KIP-966) eligible leader replicas from Metadata and
DescribeTopicPartitions.

A KRaft cluster has no ZooKeeper to read behind its back, so the harness asks the nodes, with
raw requests on their own listeners (never through a proxy: an observer must not sit behind the
fault it observes), each question of the first node that answers it:

* the active controller and its epoch are the quorum's leader and leader epoch in DescribeQuorum,
  with each voter's log end offset, so a voter's lag is the leader's end offset minus its own —
  Kafka's ``kafka-metadata-quorum describe --status/--replication``. It is asked of every
  voter's controller listener, where only a voter that believes it leads answers; when two do
  (a leader cut off from the quorum has not yet noticed that another was elected), the higher
  epoch is the quorum's. Metadata's "controller id" would not do: a KRaft broker answers with a
  random live broker there (KIP-590), never the controller; nor would a broker's forwarding of
  DescribeQuorum, which waits on the controller it last knew — the one a fault just cut off;
* registrations, leaders and ISR are the metadata image a broker serves in Metadata, which
  lists only unfenced brokers: a broker whose heartbeats stopped is fenced, and gone from it;
* where the version has KIP-966, DescribeTopicPartitions adds a partition's eligible leader
  replicas (ELR) and last known ELR.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from harness.cluster.state import leader_of
from harness.raw_client import RawClient
from harness.wire.errors import ErrorCode

METADATA, DESCRIBE_QUORUM, DESCRIBE_TOPIC_PARTITIONS = 3, 55, 75
METADATA_VERSION = 12  # topic ids, leader epochs; what Kafka 4 answers with
DESCRIBE_QUORUM_VERSION = 1  # voters' fetch timestamps
DESCRIBE_TOPIC_PARTITIONS_VERSION = 0
METADATA_LOG = "__cluster_metadata"
NO_TOPIC_ID = uuid.UUID(int=0)  # topics asked for by name
_TIMEOUT_S = 10.0

Address = tuple[str, int]


@dataclass(frozen=True)
class Voter:
    node_id: int
    log_end_offset: int
    lag: int | None
    """How far its metadata log is behind the leader's: the leader's end offset minus its own;
    None while the leader has not heard its end offset (-1)."""


@dataclass(frozen=True)
class Quorum:
    """What the active controller says of the quorum (``kafka-metadata-quorum describe``)."""

    leader_id: int | None
    leader_epoch: int
    high_watermark: int
    voters: tuple[Voter, ...]
    observers: tuple[int, ...]
    log_end_offsets: dict[int, int] = field(default_factory=dict)
    """Every replica's metadata log end offset as the leader last heard it, voters' and
    observers' (brokers of a cluster with dedicated controllers) alike; -1 when unheard."""

    def to_json(self) -> dict[str, Any]:
        return {"leader": self.leader_id, "epoch": self.leader_epoch,
                "high_watermark": self.high_watermark,
                "voters": {v.node_id: {"log_end_offset": v.log_end_offset, "lag": v.lag}
                           for v in self.voters},
                "observers": list(self.observers)}


class KraftState:
    """The :class:`~harness.cluster.state.ClusterState` of a KRaft cluster: the metadata image
    asked of the brokers ``brokers()`` gives (node id -> its own client listener), the quorum of
    every controller listener ``controllers()`` gives.

    Each broker holds its own copy of the metadata image, as far as it has fetched the metadata
    log: a node cut off from the quorum answers Metadata from a past it cannot leave. So the
    image is asked of the active controller's node first (the quorum's leader commits, its
    broker is never behind it), then of the others, as ZooKeeper mode reads the one truth."""

    def __init__(self, brokers: Callable[[], dict[int, Address]],
                 controllers: Callable[[], list[Address]], timeout: float = _TIMEOUT_S) -> None:
        self._brokers = brokers
        self._controllers = controllers
        self.timeout = timeout

    def close(self) -> None:
        """Nothing held between questions: each opens and closes its own connection."""

    def _ask(self, api_key: int, version: int, body: dict[str, Any],
             answered: Callable[[Any], bool] = lambda _: True) -> Any:
        """The first answer one of the nodes gives that ``answered`` accepts; ConnectionError
        naming the nodes when none does (all down, or none could reach the controller)."""
        tried = []
        for (host, port), response in _answers(self._freshest_first(), api_key, version, body,
                                               self.timeout):
            if not isinstance(response, OSError) and answered(response):
                return response
            why = response if isinstance(response, OSError) else f"answered {_error_of(response)}"
            tried.append(f"{host}:{port} ({why})")
        raise ConnectionError(f"no node answered: {'; '.join(tried) or 'no node runs'}")

    def _freshest_first(self) -> list[Address]:
        """The running brokers' listeners, the one furthest along the metadata log first (the
        active controller's own broker, on a combined quorum), as the leader last heard them;
        in node order when no leader answers."""
        brokers = self._brokers()
        try:
            offsets = self.quorum().log_end_offsets
        except ConnectionError:
            offsets = {}
        return [brokers[node] for node in sorted(brokers,
                                                 key=lambda node: -offsets.get(node, -1))]

    # --- the quorum ---------------------------------------------------------------------------

    def quorum(self) -> Quorum:
        """The quorum as its leader describes it: of the voters that answer as leader, the one
        with the highest epoch. ConnectionError when no voter answers as leader (none is, or
        every one that could is down)."""
        body = {"topics": [{"topic_name": METADATA_LOG, "partitions": [{"partition_index": 0}]}]}
        leading, refused = [], []
        for (host, port), response in _answers(self._controllers(), DESCRIBE_QUORUM,
                                               DESCRIBE_QUORUM_VERSION, body, self.timeout):
            if isinstance(response, OSError):
                refused.append(f"{host}:{port} ({response})")
            elif (response.error_code == ErrorCode.none
                    and response.topics[0].partitions[0].error_code == ErrorCode.none):
                leading.append(response.topics[0].partitions[0])
            else:
                refused.append(f"{host}:{port} ({_error_of(response)})")
        if not leading:
            raise ConnectionError(f"no voter answered as the quorum's leader: "
                                  f"{'; '.join(refused) or 'no voter runs'}")
        partition = max(leading, key=lambda p: p.leader_epoch)
        end = max((v.log_end_offset for v in partition.current_voters
                   if v.replica_id == partition.leader_id), default=partition.high_watermark)
        voters = tuple(Voter(int(v.replica_id), int(v.log_end_offset),
                             max(0, int(end) - int(v.log_end_offset))
                             if v.log_end_offset >= 0 else None)
                       for v in sorted(partition.current_voters, key=lambda v: v.replica_id))
        leader = int(partition.leader_id)
        offsets = {int(r.replica_id): int(r.log_end_offset)
                   for r in (*partition.current_voters, *partition.observers)}
        return Quorum(leader if leader >= 0 else None, int(partition.leader_epoch),
                      int(partition.high_watermark), voters,
                      tuple(sorted(int(o.replica_id) for o in partition.observers)), offsets)

    def controller_id(self) -> int | None:
        """The quorum's leader: the active controller."""
        return self.quorum().leader_id

    def controller_epoch(self) -> int | None:
        """The quorum leader's epoch: it grows with every election, as ZooKeeper's
        ``/controller_epoch`` does."""
        return self.quorum().leader_epoch

    # --- the metadata image -------------------------------------------------------------------

    def _metadata(self, topics: list[str] | None) -> Any:
        body: dict[str, Any] = {
            "topics": None if topics is None else [{"name": t, "topic_id": NO_TOPIC_ID}
                                                   for t in topics],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        }
        return self._ask(METADATA, METADATA_VERSION, body)

    def cluster_id(self) -> str | None:
        return self._metadata([]).cluster_id

    def registered_broker_ids(self) -> list[int]:
        """The unfenced, registered brokers of the metadata image."""
        return sorted(int(b.node_id) for b in self._metadata([]).brokers)

    def broker_registration(self, broker_id: int) -> dict[str, Any] | None:
        for broker in self._metadata([]).brokers:
            if broker.node_id == broker_id:
                return {"host": broker.host, "port": int(broker.port), "rack": broker.rack}
        return None

    def partition_state(self, topic: str, partition: int) -> dict[str, Any] | None:
        """ZooKeeper's shape (``leader``, ``isr``, ``leader_epoch``) plus ``replicas`` and,
        where the version has them, ``elr`` and ``last_known_elr``; None for no such topic or
        partition."""
        return self._partition_states(self._metadata([topic]), elr=True).get(
            f"{topic}/{partition}")

    def leader(self, topic: str, partition: int) -> int | None:
        return leader_of(self.partition_state(topic, partition))

    def partition_states(self, *, internal: bool = False) -> dict[str, dict[str, Any]]:
        """``topic/partition`` -> its state, for every topic (internal ones when asked)."""
        return self._partition_states(self._metadata(None), elr=False, internal=internal)

    def _partition_states(self, metadata: Any, *, elr: bool,
                          internal: bool = True) -> dict[str, dict[str, Any]]:
        states: dict[str, dict[str, Any]] = {}
        for topic in metadata.topics:
            if topic.error_code != ErrorCode.none or (topic.is_internal and not internal):
                continue
            for p in topic.partitions:
                states[f"{topic.name}/{p.partition_index}"] = {
                    "leader": int(p.leader_id), "leader_epoch": int(p.leader_epoch),
                    "isr": sorted(int(b) for b in p.isr_nodes),
                    "replicas": [int(b) for b in p.replica_nodes]}
        if elr and states:
            for name, eligible in self._eligible(list({n.rpartition("/")[0] for n in states})):
                if name in states:
                    states[name].update(eligible)
        return states

    def _eligible(self, topics: list[str]) -> Iterator[tuple[str, dict[str, list[int]]]]:
        """Each partition's ELR and last known ELR (KIP-966), where the nodes answer
        DescribeTopicPartitions; nothing where they do not."""
        try:
            response = self._ask(DESCRIBE_TOPIC_PARTITIONS, DESCRIBE_TOPIC_PARTITIONS_VERSION, {
                "topics": [{"name": t} for t in topics], "response_partition_limit": 2000,
                "cursor": None})
        except ConnectionError:
            return
        for topic in response.topics:
            for p in topic.partitions:
                yield f"{topic.name}/{p.partition_index}", {
                    "elr": sorted(int(b) for b in p.eligible_leader_replicas or ()),
                    "last_known_elr": sorted(int(b) for b in p.last_known_elr or ())}


def _answers(addresses: list[Address], api_key: int, version: int, body: dict[str, Any],
             timeout: float) -> Iterator[tuple[Address, Any]]:
    """Each node's answer to one request, on a connection of its own, or the OSError that
    stood in its way, node by node as the caller reads them."""
    for host, port in addresses:
        try:
            with RawClient(host, port, timeout=timeout,
                           client_id="kafka-harness-state") as client:
                yield (host, port), client.request(api_key, version, body)
        except OSError as exc:
            yield (host, port), exc


def _error_of(response: Any) -> str:
    """The error a DescribeQuorum answer carries, for the message when every node refuses."""
    code = getattr(response, "error_code", ErrorCode.none)
    if code == ErrorCode.none and getattr(response, "topics", None):
        code = response.topics[0].partitions[0].error_code
    return ErrorCode(code).name
