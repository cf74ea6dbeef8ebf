"""Topic deletion as the controller drives it (Kafka's ``TopicDeletionManager``, simplified).

A DeleteTopics request (or an admin tool) creates ``/admin/delete_topics/[t]``. The controller
then, for a topic whose replicas are all alive:

1. tells every broker the topic's partitions are going (UpdateMetadata with leader -2), so
   clients stop being sent to them;
2. sends StopReplica with ``delete_partition`` to every replica, and waits for each answer;
3. once all replicas confirmed, removes the topic's znodes (assignment, partition states,
   config, the request) in one fenced transaction.

A topic with a replica on a dead broker waits — deleting the znodes first would leave that
broker holding a log nobody will ever tell it to delete — and resumes when the broker returns.
While a topic is being deleted no leader is elected for it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

from harness.wire.errors import ErrorCode
from reference_broker.controller.controller_context import ControllerContext
from reference_broker.controller.request_batch import (
    EPOCH_DURING_DELETE,
    ControllerBrokerRequestBatch,
)
from reference_broker.log.topic_partition import TopicPartition
from reference_broker.zk.kafka_zk_client import KafkaZkClient

log = logging.getLogger("reference_broker.controller.topic_deletion")


class TopicDeletionManager:
    def __init__(
        self,
        zk: KafkaZkClient,
        context: ControllerContext,
        *,
        delete_topic_enable: bool,
        new_batch: Callable[[], ControllerBrokerRequestBatch],
        send: Callable[[ControllerBrokerRequestBatch], None],
    ) -> None:
        self.zk = zk
        self.context = context
        self.enabled = delete_topic_enable
        self._new_batch = new_batch
        self._send = send
        # Topic → (broker, partition) StopReplica answers still awaited.
        self._awaiting: dict[str, set[tuple[int, TopicPartition]]] = {}

    def enqueue(self, topics: Iterable[str]) -> None:
        """Take up deletion requests; requests for unknown topics (or while deletion is
        disabled) are removed, as Kafka does."""
        ctx = self.context
        for topic in topics:
            if not self.enabled:
                log.info("delete.topic.enable is false: ignoring the request to delete %r", topic)
                self.zk.delete_delete_topic_request(
                    topic, controller_epoch_zk_version=ctx.epoch_zk_version)
            elif topic not in ctx.all_topics:
                self.zk.delete_delete_topic_request(
                    topic, controller_epoch_zk_version=ctx.epoch_zk_version)
            elif topic not in ctx.topics_to_delete:
                log.info("Controller epoch %d: deleting topic %r", ctx.epoch, topic)
                ctx.topics_to_delete.add(topic)
        self.resume()

    def is_in_progress(self, topic: str) -> bool:
        return topic in self._awaiting

    def resume(self) -> None:
        """Start every queued deletion whose replicas are all alive and not being moved."""
        ctx = self.context
        for topic in sorted(ctx.topics_to_delete - set(self._awaiting)):
            partitions = ctx.partitions_of(topic)
            replicas = {(r, tp) for tp in partitions for r in ctx.replicas(tp)}
            if any(r not in ctx.live_brokers for r, _ in replicas):
                log.info("deletion of topic %r waits for its replicas on dead brokers", topic)
                continue
            if any(tp in ctx.reassignments for tp in partitions):
                continue
            self._awaiting[topic] = set(replicas)
            batch = self._new_batch()
            batch.add_update_metadata(ctx.live_brokers, partitions)
            for tp in partitions:
                batch.add_stop_replica(ctx.replicas(tp), tp, delete_partition=True,
                                       leader_epoch=EPOCH_DURING_DELETE)
            self._send(batch)
            if not replicas:
                self._complete(topic)

    def on_broker_failure(self, dead: Iterable[int]) -> None:
        """Answers a dead broker owed are lost: start those deletions over when it returns."""
        dead = set(dead)
        for topic, awaiting in list(self._awaiting.items()):
            if any(broker in dead for broker, _ in awaiting):
                del self._awaiting[topic]

    def on_stop_replica_response(self, broker_id: int,
                                 errors: Mapping[TopicPartition, ErrorCode]) -> None:
        """Record one broker's StopReplica answer; a failed partition is retried."""
        retry = False
        for tp, error in errors.items():
            awaiting = self._awaiting.get(tp.topic)
            if awaiting is None:
                continue
            if error is not ErrorCode.none:
                log.warning("broker %d failed to delete %s-%d (error %d); retrying", broker_id,
                            tp.topic, tp.partition, error)
                del self._awaiting[tp.topic]
                retry = True
                continue
            awaiting.discard((broker_id, tp))
            if not awaiting:
                self._complete(tp.topic)
        if retry:
            self.resume()

    def _complete(self, topic: str) -> None:
        ctx = self.context
        self._awaiting.pop(topic, None)
        self.zk.delete_topic_znodes(topic, controller_epoch_zk_version=ctx.epoch_zk_version)
        ctx.remove_topic(topic)
        log.info("Controller epoch %d: topic %r deleted", ctx.epoch, topic)
