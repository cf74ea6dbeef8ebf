"""The controller of a ZooKeeper-mode cluster: one event queue, one event at a time.

Every broker runs a ``KafkaController``; the one that owns ``/controller`` is *active* and
makes every leadership decision, the others only wait to take over. Everything that happens —
a watch firing, a ControlledShutdown or ElectLeaders request, a periodic check, a broker's
answer — becomes an event on one asyncio queue. Events are processed strictly one after
another, and their handlers run on a single dedicated thread because ZooKeeper calls block:
so handlers may read and write the context and ZooKeeper freely, and never race each other
(Kafka's ``ControllerEventManager`` design). Requests to brokers a handler decides on are
collected and sent by the asyncio side once the handler returns.

Kazoo watch callbacks run on kazoo's threads and only enqueue events
(``loop.call_soon_threadsafe``). Handlers of an inactive controller return at once.
A ``ControllerMovedError`` from any fenced write means another controller has been elected:
this one resigns on the spot.

This module is the machinery and the controller's own life: the event queue, sending requests
to brokers, start-up, election, failover, resignation and the watches that turn ZooKeeper
changes into events. What each of those events does is in
:mod:`reference_broker.controller.controller_event_processor`, a mixin of
:class:`KafkaController`, kept apart so that each module stays small.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from harness.wire.errors import ErrorCode
from reference_broker.config import KafkaConfig
from reference_broker.controller.channel_manager import ClientFactory, ControllerChannelManager
from reference_broker.controller.controller_context import ControllerContext
from reference_broker.controller.controller_event_processor import ControllerEventProcessor
from reference_broker.controller.partition_state_machine import PartitionStateMachine
from reference_broker.controller.reassignment import ReassignmentManager
from reference_broker.controller.request_batch import (
    STOP_REPLICA,
    BrokerRequest,
    ControllerBrokerRequestBatch,
)
from reference_broker.controller.topic_deletion import TopicDeletionManager
from reference_broker.log.topic_partition import TopicPartition
from reference_broker.network.tasks import cancel_and_wait
from reference_broker.zk.admin_znodes import (
    ConfigEntityChangeNotificationSequenceZNode,
    DeleteTopicsZNode,
    IsrChangeNotificationZNode,
    PreferredReplicaElectionZNode,
    ReassignPartitionsZNode,
)
from reference_broker.zk.kafka_zk_client import ControllerEpoch, ControllerMovedError, KafkaZkClient
from reference_broker.zk.topic_znodes import TopicsZNode, TopicZNode

SHUTDOWN_TIMEOUT_S = 15.0

log = logging.getLogger("reference_broker.controller")


@dataclass
class _Event:
    name: str
    handler: Callable[..., Any]
    args: tuple[Any, ...] = ()
    result: asyncio.Future[Any] | None = field(default=None)


class KafkaController(ControllerEventProcessor):
    def __init__(self, config: KafkaConfig, zk: KafkaZkClient, broker_epoch: int, *,
                 client_factory: ClientFactory | None = None) -> None:
        self.config = config
        self.zk = zk
        self.broker_id = config.broker_id
        self.broker_epoch = broker_epoch
        self.channel = ControllerChannelManager(
            self.broker_id,
            peer_addresses=config["broker.peer.addresses"],
            listener_name=config["inter.broker.listener.name"],
            request_timeout_s=config["controller.socket.timeout.ms"] / 1000,
            client_factory=client_factory,
        )
        self.context = ControllerContext()
        self.active_controller_id: int | None = None
        self._active = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue[_Event] = asyncio.Queue()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"controller-{self.broker_id}")
        self._runner: asyncio.Task[None] | None = None
        self._rebalancer: asyncio.Task[None] | None = None
        self._effects: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []
        self._watching = False
        self._watched_topics: set[str] = set()
        self._last_config_change: str = ""
        self._stopped = False
        self._psm = PartitionStateMachine(zk, self.context, False)
        self._deletion = self._new_deletion_manager()
        self._reassignment = self._new_reassignment_manager()

    # --- public API ---------------------------------------------------------------------------

    @property
    def is_active(self) -> bool:
        return self._active

    @property
    def epoch(self) -> int:
        return self.context.epoch if self._active else -1

    async def startup(self) -> None:
        """Start the event loop, watch ``/controller`` and try to become controller."""
        self._loop = asyncio.get_running_loop()
        self._runner = self._loop.create_task(self._run(), name=f"controller-{self.broker_id}")
        self.zk.add_session_handlers(
            on_expired=lambda: self._post_threadsafe("Expire", self._on_session_expired),
            on_new_session=lambda: self._post_threadsafe("Reelect", self._elect),
        )
        self.zk.watch_controller(
            lambda _id: self._post_threadsafe("ControllerChange", self._on_controller_change))
        await self._call("Startup", self._elect)

    async def shutdown(self) -> None:
        """Resign (deleting our ``/controller`` so another broker takes over at once)."""
        if self._runner is None or self._stopped:
            return
        try:
            # Bounded: a broker must stop even if the queue is stuck behind a hung handler.
            await asyncio.wait_for(self._call("Shutdown", self._shutdown), SHUTDOWN_TIMEOUT_S)
        except TimeoutError:
            log.warning("Controller %d: shutdown event not processed within %.0fs; stopping "
                        "anyway", self.broker_id, SHUTDOWN_TIMEOUT_S)
        finally:
            self._stopped = True
            await cancel_and_wait(self._runner)
            await self._stop_rebalancer()
            await self.channel.shutdown()
            self._executor.shutdown(wait=True)

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int
                                  ) -> tuple[ErrorCode, list[tuple[str, int]]]:
        """Move leadership off ``broker_id``; (error, partitions it still leads)."""
        if not self._active:
            return ErrorCode.not_controller, []
        return await self._call("ControlledShutdown", self._controlled_shutdown, broker_id,
                                broker_epoch)

    async def elect_leaders(self, election_type: int, partitions: list[tuple[str, int]] | None
                            ) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
        """ElectLeaders: 0 preferred, 1 unclean; per partition (error, message)."""
        if not self._active:
            return {(tp[0], tp[1]): (ErrorCode.not_controller, None) for tp in partitions or []}
        return await self._call("ElectLeaders", self._elect_leaders, election_type, partitions)

    # --- the event queue ----------------------------------------------------------------------

    def _post(self, name: str, handler: Callable[..., Any], *args: Any) -> None:
        if not self._stopped:
            self._queue.put_nowait(_Event(name, handler, args))

    def _post_threadsafe(self, name: str, handler: Callable[..., Any], *args: Any) -> None:
        """From a kazoo thread. After the loop has gone, events are dropped."""
        loop = self._loop
        if loop is None or self._stopped or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # the loop closed in between
            loop.call_soon_threadsafe(self._post, name, handler, *args)

    async def _call(self, name: str, handler: Callable[..., Any], *args: Any) -> Any:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(_Event(name, handler, args, future))
        return await future

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            event = await self._queue.get()
            self._effects = []
            try:
                result = await loop.run_in_executor(self._executor, event.handler, *event.args)
            except ControllerMovedError as exc:
                log.info("Controller %d: %s; resigning", self.broker_id, exc)
                self._effects = []
                await loop.run_in_executor(self._executor, self._move_controller)
                result = exc
            except Exception as exc:
                log.exception("Controller %d: processing %s failed", self.broker_id, event.name)
                result = exc
            await self._apply_effects()
            if event.result is not None and not event.result.done():
                if isinstance(result, BaseException):
                    event.result.set_exception(result)
                else:
                    event.result.set_result(result)

    def _after(self, action: Callable[..., Any], *args: Any) -> None:
        """Run ``action`` on the event loop once the current handler has returned."""
        self._effects.append((action, args))

    async def _apply_effects(self) -> None:
        effects, self._effects = self._effects, []
        for action, args in effects:
            try:
                outcome = action(*args)
                if inspect.isawaitable(outcome):
                    await outcome
            except Exception:
                log.exception("Controller %d: applying %r failed", self.broker_id, action)

    # --- requests to brokers --------------------------------------------------------------------

    def _new_batch(self) -> ControllerBrokerRequestBatch:
        return ControllerBrokerRequestBatch(self.broker_id, self.context,
                                            self.config["inter.broker.listener.name"])

    def _send(self, batch: ControllerBrokerRequestBatch) -> None:
        for request in batch.requests():
            callback = self._on_stop_replica_response if request.deleted_partitions else None
            self._after(self.channel.send, request, callback)

    def _on_stop_replica_response(self, request: BrokerRequest, response: Any) -> None:
        top: ErrorCode = response.error_code
        errors = {tp: top for tp in request.deleted_partitions}
        for error in getattr(response, "partition_errors", ()):
            tp = TopicPartition(error.topic_name, error.partition_index)
            if tp in errors and top is ErrorCode.none:
                errors[tp] = error.error_code
        if request.api_key == STOP_REPLICA:
            self._post("TopicDeletionStopReplicaResponseReceived",
                       self._on_deletion_response, request.broker_id, errors)

    def _on_deletion_response(self, broker_id: int,
                              errors: dict[TopicPartition, ErrorCode]) -> None:
        if self._active:
            self._deletion.on_stop_replica_response(broker_id, errors)

    # --- election and failover -------------------------------------------------------------------

    def _elect(self) -> None:
        if self._active or self._stopped:
            return
        won = self.zk.try_to_become_controller(self.broker_id)
        if won is None:
            self.active_controller_id = self.zk.get_controller_id()
            log.info("Broker %d: broker %s is the controller", self.broker_id,
                     self.active_controller_id)
            return
        self._on_controller_failover(won)

    def _on_controller_failover(self, won: ControllerEpoch) -> None:
        log.info("Broker %d: became the controller (epoch %d)", self.broker_id, won.epoch)
        self.context = ctx = ControllerContext(epoch=won.epoch, epoch_zk_version=won.zk_version)
        self._psm = PartitionStateMachine(self.zk, ctx,
                                          self.config["unclean.leader.election.enable"])
        self._deletion = self._new_deletion_manager()
        self._reassignment = self._new_reassignment_manager()
        self._active = True
        self.active_controller_id = self.broker_id
        self._register_watches()
        for info, broker_epoch in self.zk.get_all_brokers_and_epochs().values():
            ctx.add_broker(info, broker_epoch)
            self._after(self.channel.add_broker, info)
        for topic in self.zk.get_all_topics():
            self._load_topic(topic)
        self.zk.delete_isr_change_notifications(self.zk.get_isr_change_notifications())
        changes = self.zk.get_config_change_notifications()
        self._last_config_change = changes[-1][0] if changes else ""
        ctx.topics_to_delete.update(
            t for t in self.zk.get_delete_topic_requests() if t in ctx.all_topics)

        created = self._psm.initialize(
            tp for tp in ctx.all_partitions() if tp.topic not in ctx.topics_to_delete)
        self._psm.elect_offline(ctx.offline_partitions())
        # Brokers that died while no controller was watching leave the ISRs (and leadership)
        # now, as they would have on a live controller's broker-failure event.
        live = ctx.live_or_shutting_down_broker_ids
        for broker_id in sorted({r for tp in ctx.all_partitions() for r in ctx.replicas(tp)}
                                - live):
            self._psm.remove_replica_from_isr(broker_id, [
                tp for tp in ctx.partitions_on_broker(broker_id)
                if tp.topic not in ctx.topics_to_delete])
        batch = self._new_batch()
        for tp in ctx.all_partitions():
            if tp.topic not in ctx.topics_to_delete:
                batch.add_leader_and_isr(ctx.replicas(tp), tp, is_new=tp in created)
        batch.add_update_metadata(ctx.live_brokers, ctx.all_partitions())
        self._send(batch)

        self._deletion.enqueue(self.zk.get_delete_topic_requests())
        self._reassignment.on_request_changed()
        self._on_preferred_replica_election_request()
        if self.config["auto.leader.rebalance.enable"]:
            self._after(self._start_rebalancer)

    def _new_deletion_manager(self) -> TopicDeletionManager:
        return TopicDeletionManager(self.zk, self.context,
                                    delete_topic_enable=self.config["delete.topic.enable"],
                                    new_batch=self._new_batch, send=self._send)

    def _new_reassignment_manager(self) -> ReassignmentManager:
        return ReassignmentManager(self.zk, self.context, self._psm, new_batch=self._new_batch,
                                   send=self._send)

    def _load_topic(self, topic: str) -> None:
        found = self.zk.get_topic_assignment(topic)
        if found is None:
            return
        assignment, _ = found
        self.context.set_topic(topic, assignment.topic_id, dict(assignment.partitions))
        for partition, (state, version) in self.zk.get_topic_partition_states(topic).items():
            tp = TopicPartition(topic, partition)
            if tp in self.context.assignments:
                self.context.put_state(tp, state, version)
        self._watch_topic(topic)

    def _resign(self) -> None:
        """Stop acting as controller; the state we knew is dropped with the epoch."""
        if not self._active:
            return
        log.info("Controller %d: resigning (epoch %d)", self.broker_id, self.context.epoch)
        self._active = False
        self.context = ControllerContext()
        self._psm = PartitionStateMachine(self.zk, self.context, False)
        self._deletion = self._new_deletion_manager()
        self._reassignment = self._new_reassignment_manager()
        self._after(self._stop_rebalancer)
        self._after(self.channel.shutdown)

    def _move_controller(self) -> None:
        """After ``ControllerMovedError``: resign, and give up ``/controller`` if it is still
        ours (the delete is fenced, so it never removes a successor's)."""
        epoch_zk_version = self.context.epoch_zk_version
        was_active = self._active
        self._resign()
        if was_active:
            with contextlib.suppress(ControllerMovedError):
                self.zk.delete_controller(epoch_zk_version)
        self.active_controller_id = self.zk.get_controller_id()

    def _on_controller_change(self) -> None:
        current = self.zk.get_controller_id()
        self.active_controller_id = current
        if self._active and current != self.broker_id:
            self._resign()
        if current is None:
            self._elect()

    def _on_session_expired(self) -> None:
        # Our ephemerals are gone and a successor may already act: resign without writing.
        self._resign()
        self.active_controller_id = None

    def _shutdown(self) -> None:
        if self._active:
            epoch_zk_version = self.context.epoch_zk_version
            self._resign()
            try:
                self.zk.delete_controller(epoch_zk_version)
            except Exception as exc:  # moved on, or the session is already gone: nothing to do
                log.info("Controller %d: not deleting /controller: %s", self.broker_id, exc)
        self._stopped = True

    # --- watches --------------------------------------------------------------------------------

    def _register_watches(self) -> None:
        """Registered on first activation and kept for the process's life (kazoo re-arms them
        after a session expiry); their events are ignored while not active."""
        if self._watching:
            return
        self._watching = True
        post = self._post_threadsafe
        self.zk.watch_broker_ids(lambda _ids: post("BrokerChange", self._on_broker_change))
        self.zk.watch_children(TopicsZNode.path(),
                               lambda _c: post("TopicChange", self._on_topic_change))
        self.zk.watch_children(DeleteTopicsZNode.path(),
                               lambda _c: post("TopicDeletion", self._on_topic_deletion))
        self.zk.watch_children(IsrChangeNotificationZNode.path(),
                               lambda _c: post("IsrChangeNotification", self._on_isr_change))
        self.zk.watch_children(ConfigEntityChangeNotificationSequenceZNode.parent_path(),
                               lambda _c: post("ConfigChange", self._on_config_change))
        self.zk.watch_data(ReassignPartitionsZNode.path(),
                           lambda _d: post("PartitionReassignment", self._on_reassignment))
        self.zk.watch_data(PreferredReplicaElectionZNode.path(),
                           lambda _d: post("PreferredReplicaElection",
                                           self._on_preferred_replica_election_request))

    def _watch_topic(self, topic: str) -> None:
        if topic in self._watched_topics:
            return
        self._watched_topics.add(topic)

        def on_data(data: bytes | None) -> bool | None:
            if data is None or topic not in self._watched_topics:
                self._watched_topics.discard(topic)
                return False
            self._post_threadsafe("PartitionModifications", self._on_partition_modifications,
                                  topic)
            return None

        self.zk.watch_data(TopicZNode.path(topic), on_data)

    # --- auto leader rebalance ------------------------------------------------------------------

    async def _start_rebalancer(self) -> None:
        await self._stop_rebalancer()
        self._rebalancer = asyncio.get_running_loop().create_task(self._rebalance_periodically())

    async def _stop_rebalancer(self) -> None:
        task, self._rebalancer = self._rebalancer, None
        await cancel_and_wait(task)

    async def _rebalance_periodically(self) -> None:
        interval = self.config["leader.imbalance.check.interval.seconds"]
        while True:
            await asyncio.sleep(interval)
            self._post("AutoPreferredReplicaLeaderElection", self._check_leader_imbalance)
