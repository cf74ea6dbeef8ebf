"""Topics, their configs and their partitions' states: the share of
:class:`~reference_broker.zk.kafka_zk_client.KafkaZkClient` both the brokers and the controller use.

Topic assignments (``/brokers/topics/[topic]``) and config overrides (``/config/topics/[topic]``,
announced under ``/config/changes``), partition states — created and re-elected by the
controller, their ISRs shrunk and expanded by leaders, every write checked against the znode
version that was read — and the leaders' ISR change notifications that tell the controller to
re-read them. Raises :class:`TopicExistsError` and :class:`PartitionStateConflictError`, which a
caller acts on without knowing kazoo.

Kept apart from the client module (which keeps the session, broker registration and controller
election) so each stays small, as :mod:`~reference_broker.zk.controller_zk` and
:mod:`~reference_broker.zk.broker_zk` are; :class:`TopicZkOps` is a mixin of ``KafkaZkClient``
and relies on its ``_zk`` session and ``_fenced_write``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from typing import Any

from kazoo.client import KazooClient, TransactionRequest
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from reference_broker.log.topic_partition import TopicPartition
from reference_broker.zk.admin_znodes import (
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityZNode,
    IsrChangeNotificationSequenceZNode,
    IsrChangeNotificationZNode,
)
from reference_broker.zk.topic_znodes import (
    LeaderIsrAndControllerEpoch,
    TopicAssignment,
    TopicPartitionStateZNode,
    TopicsZNode,
    TopicZNode,
)


class PartitionStateConflictError(RuntimeError):
    """The partition state changed since it was read: the write was not applied."""

    def __init__(self, tp: TopicPartition, expected_version: int) -> None:
        super().__init__(
            f"partition state of {tp.topic}-{tp.partition} is no longer at znode version "
            f"{expected_version}; re-read it and retry"
        )
        self.tp = tp
        self.expected_version = expected_version


class TopicExistsError(RuntimeError):
    """``/brokers/topics/[topic]`` already exists."""


class TopicZkOps:
    """Reads and writes of topics and partition states; mixed into ``KafkaZkClient``."""

    _zk: KazooClient
    _fenced_write: Callable[[Callable[[TransactionRequest], None], int | None], Any]

    # --- topics ----------------------------------------------------------------------------

    def get_all_topics(self) -> list[str]:
        return sorted(self._zk.get_children(TopicsZNode.path()))

    def create_topic_assignment(self, topic: str, assignment: TopicAssignment) -> None:
        try:
            self._zk.create(TopicZNode.path(topic), TopicZNode.encode(assignment))
        except NodeExistsError:
            raise TopicExistsError(f"topic {topic!r} already exists") from None

    def get_topic_assignment(self, topic: str) -> tuple[TopicAssignment, int] | None:
        """The assignment and its znode version, or None if the topic does not exist."""
        try:
            data, stat = self._zk.get(TopicZNode.path(topic))
        except NoNodeError:
            return None
        return TopicZNode.decode(topic, data), stat.version

    def set_topic_assignment(
        self,
        topic: str,
        assignment: TopicAssignment,
        expected_version: int,
        *,
        controller_epoch_zk_version: int | None = None,
    ) -> int:
        """Replace the assignment if unchanged since ``expected_version``; the new version."""
        def op(tx: TransactionRequest) -> None:
            tx.set_data(TopicZNode.path(topic), TopicZNode.encode(assignment), expected_version)

        return self._fenced_write(op, controller_epoch_zk_version).version

    def get_topic_config(self, topic: str) -> dict[str, str]:
        """The topic's overrides of the broker defaults (empty when it has none)."""
        try:
            data, _ = self._zk.get(ConfigEntityZNode.path(ConfigEntityZNode.TOPICS, topic))
        except NoNodeError:
            return {}
        return ConfigEntityZNode.decode(data)

    def set_topic_config(self, topic: str, config: dict[str, str]) -> None:
        """Write the overrides, then announce the change so every broker reloads them."""
        path = ConfigEntityZNode.path(ConfigEntityZNode.TOPICS, topic)
        data = ConfigEntityZNode.encode(config)
        try:
            self._zk.set(path, data)
        except NoNodeError:
            self._zk.create(path, data, makepath=True)
        self._zk.create(
            ConfigEntityChangeNotificationSequenceZNode.path(),
            ConfigEntityChangeNotificationSequenceZNode.encode(ConfigEntityZNode.TOPICS, topic),
            sequence=True,
        )

    # --- partition state -------------------------------------------------------------------

    def create_partition_state(
        self,
        tp: TopicPartition,
        state: LeaderIsrAndControllerEpoch,
        *,
        controller_epoch_zk_version: int | None = None,
    ) -> int:
        """Create the state znode (and its parents) for a new partition; returns its version."""
        path = TopicPartitionStateZNode.path(tp)
        self._zk.ensure_path(path.rsplit("/", 1)[0])

        def op(tx: TransactionRequest) -> None:
            tx.create(path, TopicPartitionStateZNode.encode(state))

        self._fenced_write(op, controller_epoch_zk_version)
        return 0

    def get_partition_state(
        self, tp: TopicPartition
    ) -> tuple[LeaderIsrAndControllerEpoch, int] | None:
        """The state and its znode version, the version the next update must name."""
        try:
            data, stat = self._zk.get(TopicPartitionStateZNode.path(tp))
        except NoNodeError:
            return None
        return TopicPartitionStateZNode.decode(tp, data), stat.version

    def update_partition_state(
        self,
        tp: TopicPartition,
        state: LeaderIsrAndControllerEpoch,
        expected_version: int,
        *,
        controller_epoch_zk_version: int | None = None,
    ) -> int:
        """Write ``state`` only if the znode is still at ``expected_version``; the new version.

        Leaders updating their ISR pass no controller version; the controller passes its own so
        that a deposed controller cannot overwrite its successor's decisions.
        """
        def op(tx: TransactionRequest) -> None:
            tx.set_data(
                TopicPartitionStateZNode.path(tp),
                TopicPartitionStateZNode.encode(state),
                expected_version,
            )

        try:
            return self._fenced_write(op, controller_epoch_zk_version).version
        except BadVersionError:
            raise PartitionStateConflictError(tp, expected_version) from None

    # --- ISR change notifications -----------------------------------------------------------

    def create_isr_change_notification(self, partitions: Iterable[TopicPartition]) -> str:
        """Tell the controller these partitions' ISR changed; returns the sequence number."""
        path = self._zk.create(
            IsrChangeNotificationSequenceZNode.path(),
            IsrChangeNotificationSequenceZNode.encode(partitions),
            sequence=True,
        )
        return IsrChangeNotificationSequenceZNode.sequence_number(path)

    def get_isr_change_notifications(self) -> list[str]:
        """Pending notifications' sequence numbers, oldest first."""
        children = self._zk.get_children(IsrChangeNotificationZNode.path())
        return sorted(IsrChangeNotificationSequenceZNode.sequence_number(c) for c in children)

    def get_isr_change_notification(self, sequence_number: str) -> frozenset[TopicPartition]:
        """The partitions named by one notification (empty if it was already deleted)."""
        try:
            data, _ = self._zk.get(IsrChangeNotificationSequenceZNode.path(sequence_number))
        except NoNodeError:
            return frozenset()
        return IsrChangeNotificationSequenceZNode.decode(data)

    def delete_isr_change_notifications(self, sequence_numbers: Iterable[str]) -> None:
        for sequence_number in sequence_numbers:
            with contextlib.suppress(NoNodeError):
                self._zk.delete(IsrChangeNotificationSequenceZNode.path(sequence_number))
