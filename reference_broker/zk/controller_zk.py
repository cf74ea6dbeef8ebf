"""The controller's share of :class:`~reference_broker.zk.kafka_zk_client.KafkaZkClient`.

Admin requests (``/admin/delete_topics``, ``/admin/reassign_partitions``,
``/admin/preferred_replica_election``), removing a deleted topic's znodes, config-change
notifications and data watches. Only the active controller calls these, and its deletions are
fenced by the ``/controller_epoch`` version like every other controller write, so a deposed
controller cannot delete what its successor is managing.

Kept apart from the client module so each stays small; :class:`ControllerZkOps` is a mixin of
``KafkaZkClient`` and relies on its ``_zk`` session and ``_fenced_write``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kazoo.client import KazooClient, TransactionRequest
from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.recipe.watchers import DataWatch

from reference_broker.log.topic_partition import TopicPartition
from reference_broker.zk.admin_znodes import (
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityZNode,
    DeleteTopicsTopicZNode,
    DeleteTopicsZNode,
    PreferredReplicaElectionZNode,
    ReassignPartitionsZNode,
)
from reference_broker.zk.topic_znodes import (
    LeaderIsrAndControllerEpoch,
    TopicPartitionStateZNode,
    TopicPartitionsZNode,
    TopicZNode,
)
from reference_broker.zk.zk_json import ZkDataError


class ControllerZkOps:
    """Controller-only reads and writes; mixed into ``KafkaZkClient``."""

    _zk: KazooClient
    _fenced_write: Callable[[Callable[[TransactionRequest], None], int | None], Any]

    # --- partition states of a whole topic --------------------------------------------------

    def get_topic_partition_states(
        self, topic: str
    ) -> dict[int, tuple[LeaderIsrAndControllerEpoch, int]]:
        """Every partition state of ``topic`` that exists, with its znode version."""
        try:
            children = self._zk.get_children(TopicPartitionsZNode.path(topic))
        except NoNodeError:
            return {}
        states = {}
        for child in children:
            if not child.isdigit():
                continue
            tp = TopicPartition(topic, int(child))
            try:
                data, stat = self._zk.get(TopicPartitionStateZNode.path(tp))
            except NoNodeError:
                continue
            states[tp.partition] = (TopicPartitionStateZNode.decode(tp, data), stat.version)
        return states

    # --- topic deletion ---------------------------------------------------------------------

    def create_delete_topic_request(self, topic: str) -> None:
        """Ask the controller to delete ``topic`` (what DeleteTopics does in ZooKeeper mode)."""
        with contextlib.suppress(NodeExistsError):
            self._zk.create(DeleteTopicsTopicZNode.path(topic), b"", makepath=True)

    def get_delete_topic_requests(self) -> list[str]:
        try:
            return sorted(self._zk.get_children(DeleteTopicsZNode.path()))
        except NoNodeError:
            return []

    def delete_delete_topic_request(
        self, topic: str, *, controller_epoch_zk_version: int | None = None
    ) -> None:
        def op(tx: TransactionRequest) -> None:
            tx.delete(DeleteTopicsTopicZNode.path(topic))

        with contextlib.suppress(NoNodeError):
            self._fenced_write(op, controller_epoch_zk_version)

    def delete_topic_znodes(self, topic: str, *, controller_epoch_zk_version: int | None = None
                            ) -> None:
        """Remove ``/brokers/topics/[t]`` with its partitions, ``/config/topics/[t]`` and the
        deletion request, in one transaction: either the topic is gone or nothing changed."""
        paths = self._subtree_post_order(TopicZNode.path(topic))
        config = ConfigEntityZNode.path(ConfigEntityZNode.TOPICS, topic)
        request = DeleteTopicsTopicZNode.path(topic)
        paths += [p for p in (config, request) if self._zk.exists(p) is not None]
        if not paths:
            return

        def op(tx: TransactionRequest) -> None:
            for path in paths:
                tx.delete(path)

        self._fenced_write(op, controller_epoch_zk_version)

    def _subtree_post_order(self, path: str) -> list[str]:
        """``path`` and its descendants, children before parents (the order deletes need)."""
        try:
            children = self._zk.get_children(path)
        except NoNodeError:
            return []
        result: list[str] = []
        for child in sorted(children):
            result += self._subtree_post_order(f"{path}/{child}")
        result.append(path)
        return result

    # --- reassignment -----------------------------------------------------------------------

    def create_partition_reassignment(
        self, reassignment: Mapping[TopicPartition, Sequence[int]]
    ) -> None:
        """Write ``/admin/reassign_partitions`` as Kafka's legacy reassignment tool does."""
        self._zk.create(ReassignPartitionsZNode.path(),
                        ReassignPartitionsZNode.encode(reassignment), makepath=True)

    def get_partition_reassignment(self) -> dict[TopicPartition, tuple[int, ...]] | None:
        """The pending reassignment, or None when there is no request (or it is unreadable,
        in which case it is also removed, as Kafka drops a malformed request)."""
        try:
            data, _ = self._zk.get(ReassignPartitionsZNode.path())
        except NoNodeError:
            return None
        try:
            return ReassignPartitionsZNode.decode(data)
        except ZkDataError:
            with contextlib.suppress(NoNodeError):
                self._zk.delete(ReassignPartitionsZNode.path())
            return None

    def set_or_delete_partition_reassignment(
        self,
        remaining: Mapping[TopicPartition, Sequence[int]],
        *,
        controller_epoch_zk_version: int | None = None,
    ) -> None:
        """Rewrite the request with what is still in flight; delete it once nothing is."""
        path = ReassignPartitionsZNode.path()

        def op(tx: TransactionRequest) -> None:
            if remaining:
                tx.set_data(path, ReassignPartitionsZNode.encode(remaining))
            else:
                tx.delete(path)

        with contextlib.suppress(NoNodeError):
            self._fenced_write(op, controller_epoch_zk_version)

    # --- preferred replica election ---------------------------------------------------------

    def create_preferred_replica_election(self, partitions: Sequence[TopicPartition]) -> None:
        self._zk.create(PreferredReplicaElectionZNode.path(),
                        PreferredReplicaElectionZNode.encode(partitions), makepath=True)

    def get_preferred_replica_election(self) -> frozenset[TopicPartition] | None:
        try:
            data, _ = self._zk.get(PreferredReplicaElectionZNode.path())
        except NoNodeError:
            return None
        try:
            return PreferredReplicaElectionZNode.decode(data)
        except ZkDataError:
            return frozenset()

    def delete_preferred_replica_election(
        self, *, controller_epoch_zk_version: int | None = None
    ) -> None:
        def op(tx: TransactionRequest) -> None:
            tx.delete(PreferredReplicaElectionZNode.path())

        with contextlib.suppress(NoNodeError):
            self._fenced_write(op, controller_epoch_zk_version)

    # --- config change notifications --------------------------------------------------------

    def get_config_change_notifications(self) -> list[tuple[str, str, str]]:
        """(sequence number, entity type, entity name) of every notification, oldest first;
        unreadable or vanished ones are skipped."""
        parent = ConfigEntityChangeNotificationSequenceZNode.parent_path()
        prefix = ConfigEntityChangeNotificationSequenceZNode.PREFIX
        try:
            children = self._zk.get_children(parent)
        except NoNodeError:
            return []
        result = []
        for child in sorted(c for c in children if c.startswith(prefix)):
            try:
                data, _ = self._zk.get(f"{parent}/{child}")
                entity_type, name = ConfigEntityChangeNotificationSequenceZNode.decode(data)
            except (NoNodeError, ZkDataError):
                continue
            result.append((child[len(prefix):], entity_type, name))
        return result

    # --- data watches -----------------------------------------------------------------------

    def watch_data(self, path: str, callback: Callable[[bytes | None], bool | None]) -> None:
        """Call ``callback`` with ``path``'s data (None while it does not exist) now and after
        every change, until it returns False. Runs on a kazoo thread."""
        DataWatch(self._zk, path, lambda data, _stat: callback(data))
