"""The broker's and the controller's only way to ZooKeeper: Kafka's znodes over a kazoo session.

Every znode is read and written through its object in :mod:`reference_broker.zk.broker_znodes`,
:mod:`~reference_broker.zk.topic_znodes` or :mod:`~reference_broker.zk.admin_znodes`, so this
module is about ZooKeeper semantics only — ephemeral ownership, version-checked writes, multi-op
transactions, watches and session expiry — and raises exceptions a caller can act on without
knowing kazoo:

* :class:`BrokerIdInUseError` — another live session owns ``/brokers/ids/[id]``;
* :class:`~reference_broker.zk.topic_zk.PartitionStateConflictError` — a partition-state write
  lost a race (re-read, retry);
* :class:`ControllerMovedError` — a controller's fenced write found a newer controller epoch.

This module keeps the session, broker registration, the cluster id, controller election and the
fenced write every controller write goes through; the rest of the client is in three mixins,
each small: :class:`~reference_broker.zk.topic_zk.TopicZkOps` (topics, their configs and
partition states), :class:`~reference_broker.zk.controller_zk.ControllerZkOps` (what only the
controller does) and :class:`~reference_broker.zk.broker_zk.BrokerZkOps` (what only brokers do).

The API is synchronous. Watch callbacks and session handlers run on kazoo's threads; the broker,
which lives on an asyncio loop, hands them over with ``loop.call_soon_threadsafe``. Callbacks
must not block: they run on the thread that delivers every other ZooKeeper event.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any, Self

from kazoo.client import KazooClient, KazooState, TransactionRequest
from kazoo.exceptions import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    RuntimeInconsistency,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import ZnodeStat
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from reference_broker.zk.admin_znodes import (
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityZNode,
    DeleteTopicsZNode,
    IsrChangeNotificationZNode,
)
from reference_broker.zk.broker_zk import BrokerZkOps
from reference_broker.zk.broker_znodes import (
    BrokerIdsZNode,
    BrokerIdZNode,
    BrokerInfo,
    ClusterIdZNode,
    ControllerEpochZNode,
    ControllerZNode,
)
from reference_broker.zk.controller_zk import ControllerZkOps
from reference_broker.zk.topic_zk import TopicZkOps
from reference_broker.zk.topic_znodes import TopicsZNode
from reference_broker.zk.zk_json import uuid_to_base64

log = logging.getLogger("reference_broker.zk")

_ROLLED_BACK = (RolledBackError, RuntimeInconsistency)

# The parents every broker makes sure exist at start-up, before it writes anything under them.
PERSISTENT_PATHS: tuple[str, ...] = (
    BrokerIdsZNode.path(),
    TopicsZNode.path(),
    ConfigEntityChangeNotificationSequenceZNode.parent_path(),
    f"/config/{ConfigEntityZNode.TOPICS}",
    f"/config/{ConfigEntityZNode.BROKERS}",
    DeleteTopicsZNode.path(),
    IsrChangeNotificationZNode.path(),
)


class BrokerIdInUseError(RuntimeError):
    """``/brokers/ids/[id]`` belongs to another session: two brokers share a ``broker.id``."""


class ControllerMovedError(RuntimeError):
    """A controller-fenced write failed: ``/controller_epoch`` is not at the version it held."""


class ZooKeeperUnavailableError(RuntimeError):
    """No ZooKeeper server in ``zookeeper.connect`` answered in time."""


@dataclass(frozen=True)
class ControllerEpoch:
    """The epoch a controller won, and the ``/controller_epoch`` znode version that fences its
    writes: any write made with it fails once another controller has incremented the epoch."""

    epoch: int
    zk_version: int


def _split_chroot(connect: str) -> tuple[str, str]:
    """``host:port,host:port/chroot`` → (hosts, "/chroot" or "")."""
    slash = connect.find("/")
    if slash < 0:
        return connect, ""
    return connect[:slash], connect[slash:].rstrip("/")


def _failure(results: list[Any]) -> Exception | None:
    """The error that aborted a multi-op transaction; the other ops only report the rollback."""
    errors = [r for r in results if isinstance(r, Exception)]
    causes = [e for e in errors if not isinstance(e, _ROLLED_BACK)]
    return next(iter(causes or errors), None)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class KafkaZkClient(TopicZkOps, ControllerZkOps, BrokerZkOps):
    """One ZooKeeper session, as Kafka's ``KafkaZkClient``: start it, use it, close it.

    ``connect`` is ``zookeeper.connect`` — ``host:port[,host:port]`` with an optional chroot
    (``/kafka``), which is created when missing, as Kafka does at start-up.
    """

    def __init__(
        self,
        connect: str,
        *,
        session_timeout_ms: int = 18_000,
        clock_ms: Callable[[], int] = _now_ms,
    ) -> None:
        self.connect = connect
        self.session_timeout_ms = session_timeout_ms
        self._clock_ms = clock_ms
        self._hosts, self._chroot = _split_chroot(connect)
        self._zk = KazooClient(hosts=connect, timeout=session_timeout_ms / 1000)
        self._zk.add_listener(self._on_state_change)
        self._lock = threading.Lock()
        self._closing = False
        self._session_lost = False
        self._registered_broker: BrokerInfo | None = None
        self._on_expired: list[Callable[[], None]] = []
        self._on_new_session: list[Callable[[], None]] = []

    # --- lifecycle -------------------------------------------------------------------------

    def start(self, timeout: float = 15.0) -> Self:
        """Connect, create the chroot if it is missing, and create Kafka's persistent paths."""
        if self._chroot:
            bootstrap = KazooClient(hosts=self._hosts, timeout=self.session_timeout_ms / 1000)
            try:
                self._connect(bootstrap, timeout)
                bootstrap.ensure_path(self._chroot)
            finally:
                bootstrap.stop()
                bootstrap.close()
        self._connect(self._zk, timeout)
        for path in PERSISTENT_PATHS:
            self._zk.ensure_path(path)
        return self

    def _connect(self, client: KazooClient, timeout: float) -> None:
        try:
            client.start(timeout=timeout)
        except KazooTimeoutError:
            # kazoo keeps retrying in the background after a timed-out start: stop it.
            client.stop()
            raise ZooKeeperUnavailableError(
                f"could not connect to ZooKeeper at {self._hosts} within {timeout:g}s "
                "(zookeeper.connect); is it running?"
            ) from None

    def close(self) -> None:
        """End the session: every ephemeral znode it owns disappears at once."""
        with self._lock:
            self._closing = True
        self._zk.stop()
        self._zk.close()

    @property
    def session_id(self) -> int:
        return self._zk.client_id[0]

    @property
    def session_credentials(self) -> tuple[int, bytes]:
        """(session id, password): whoever holds these can act as, or close, this session."""
        return self._zk.client_id

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- session expiry --------------------------------------------------------------------

    def add_session_handlers(
        self,
        *,
        on_expired: Callable[[], None] | None = None,
        on_new_session: Callable[[], None] | None = None,
    ) -> None:
        """Run ``on_expired`` when the session is lost (its ephemerals are gone: a controller
        must resign) and ``on_new_session`` once a new one is up and this broker has been
        registered again. Both run on a kazoo worker thread."""
        if on_expired is not None:
            self._on_expired.append(on_expired)
        if on_new_session is not None:
            self._on_new_session.append(on_new_session)

    def _on_state_change(self, state: str) -> None:
        # Called on kazoo's connection thread, which must not wait on ZooKeeper: the work is
        # handed to a worker.
        with self._lock:
            if self._closing:
                return
            if state == KazooState.LOST:
                self._session_lost = True
                self._zk.handler.spawn(self._run_handlers, self._on_expired)
            elif state == KazooState.CONNECTED and self._session_lost:
                self._session_lost = False
                self._zk.handler.spawn(self._reinitialize_session)

    def _reinitialize_session(self) -> None:
        broker = self._registered_broker
        if broker is not None:
            try:
                self.register_broker(broker)
            except Exception:
                log.exception("re-registering broker %d after session expiry failed",
                              broker.broker_id)
        self._run_handlers(self._on_new_session)

    @staticmethod
    def _run_handlers(handlers: list[Callable[[], None]]) -> None:
        for handler in handlers:
            try:
                handler()
            except Exception:
                log.exception("ZooKeeper session handler %r failed", handler)

    # --- brokers ---------------------------------------------------------------------------

    def register_broker(self, info: BrokerInfo) -> int:
        """Create the ephemeral ``/brokers/ids/[id]``; returns the broker epoch (its czxid).

        Re-registering within the session that already owns the znode is allowed (a retry
        after a connection loss); any other owner means a second broker with the same id.
        """
        path = BrokerIdZNode.path(info.broker_id)
        data = BrokerIdZNode.encode(replace(info, timestamp_ms=self._clock_ms()))
        stat = self._create_ephemeral_or_get(path, data)
        if stat.ephemeralOwner != self.session_id:
            raise BrokerIdInUseError(
                f"broker.id {info.broker_id} is already registered at {path} by another "
                f"ZooKeeper session (0x{stat.ephemeralOwner:x}): another broker is running "
                "with this broker.id, or this broker's previous session has not expired yet"
            )
        self._registered_broker = info
        return stat.czxid

    def _create_ephemeral_or_get(self, path: str, data: bytes) -> ZnodeStat:
        """Create an ephemeral znode; if one exists already, return its stat instead, so the
        caller can tell its own znode (a retry after a connection loss) from another's."""
        while True:
            try:
                _, stat = self._zk.create(path, data, ephemeral=True, include_data=True)
                return stat
            except NodeExistsError:
                try:
                    _, stat = self._zk.get(path)
                    return stat
                except NoNodeError:
                    continue  # its owner's session ended in between: try again

    def get_broker_ids(self) -> list[int]:
        return sorted(int(child) for child in self._zk.get_children(BrokerIdsZNode.path()))

    def get_broker(self, broker_id: int) -> BrokerInfo | None:
        try:
            data, _ = self._zk.get(BrokerIdZNode.path(broker_id))
        except NoNodeError:
            return None
        return BrokerIdZNode.decode(broker_id, data)

    def get_broker_and_epoch(self, broker_id: int) -> tuple[BrokerInfo, int] | None:
        """The registration and its broker epoch (the znode's czxid), or None if not live."""
        try:
            data, stat = self._zk.get(BrokerIdZNode.path(broker_id))
        except NoNodeError:
            return None
        return BrokerIdZNode.decode(broker_id, data), stat.czxid

    def get_all_brokers_and_epochs(self) -> dict[int, tuple[BrokerInfo, int]]:
        """Every live broker with its epoch: what the controller needs to tell a restarted
        broker (new epoch) from the one it knew."""
        brokers = {}
        for broker_id in self.get_broker_ids():
            found = self.get_broker_and_epoch(broker_id)
            if found is not None:
                brokers[broker_id] = found
        return brokers

    def get_all_brokers(self) -> dict[int, BrokerInfo]:
        brokers = {}
        for broker_id in self.get_broker_ids():
            info = self.get_broker(broker_id)
            if info is not None:
                brokers[broker_id] = info
        return brokers

    # --- cluster id ------------------------------------------------------------------------

    def get_cluster_id(self) -> str | None:
        try:
            data, _ = self._zk.get(ClusterIdZNode.path())
        except NoNodeError:
            return None
        return ClusterIdZNode.decode(data)

    def get_or_create_cluster_id(self, proposed: str | None = None) -> str:
        """The cluster id, created once by whichever broker gets there first."""
        existing = self.get_cluster_id()
        if existing is not None:
            return existing
        candidate = proposed or uuid_to_base64(uuid.uuid4().bytes)
        try:
            self._zk.create(ClusterIdZNode.path(), ClusterIdZNode.encode(candidate), makepath=True)
        except NodeExistsError:
            winner = self.get_cluster_id()
            if winner is None:
                raise RuntimeError("/cluster/id existed and then vanished") from None
            return winner
        return candidate

    # --- controller-fenced writes ----------------------------------------------------------

    def _fenced_write(
        self, op: Callable[[TransactionRequest], None], controller_epoch_zk_version: int | None
    ) -> Any:
        """Run ``op`` in a transaction, behind a check of ``/controller_epoch`` when fenced.

        Returns the op's result; raises :class:`ControllerMovedError` if the check failed, or
        the op's own kazoo error (BadVersionError, NoNodeError, NodeExistsError).
        """
        tx = self._zk.transaction()
        if controller_epoch_zk_version is not None:
            tx.check(ControllerEpochZNode.path(), controller_epoch_zk_version)
        op(tx)
        results = tx.commit()
        failure = _failure(results)
        if failure is None:
            return results[-1]
        if controller_epoch_zk_version is not None and failure is results[0]:
            raise ControllerMovedError(
                f"/controller_epoch is no longer at version {controller_epoch_zk_version}: "
                "another controller has been elected"
            )
        raise failure

    # --- controller ------------------------------------------------------------------------

    def get_controller_id(self) -> int | None:
        try:
            data, _ = self._zk.get(ControllerZNode.path())
        except NoNodeError:
            return None
        return ControllerZNode.decode(data)

    def get_controller_epoch(self) -> ControllerEpoch | None:
        try:
            data, stat = self._zk.get(ControllerEpochZNode.path())
        except NoNodeError:
            return None
        return ControllerEpoch(ControllerEpochZNode.decode(data), stat.version)

    def try_to_become_controller(self, broker_id: int) -> ControllerEpoch | None:
        """Create the ephemeral ``/controller`` and increment ``/controller_epoch``, atomically.

        Returns the new epoch, or None when another broker is (or just became) controller.
        Both writes are one ZooKeeper transaction, so an epoch is never claimed without the
        znode, and two brokers can never both win the same epoch.
        """
        current = self._get_or_create_controller_epoch()
        tx = self._zk.transaction()
        tx.create(
            ControllerZNode.path(), ControllerZNode.encode(broker_id, self._clock_ms()),
            ephemeral=True,
        )
        tx.set_data(
            ControllerEpochZNode.path(), ControllerEpochZNode.encode(current.epoch + 1),
            current.zk_version,
        )
        results = tx.commit()
        failure = _failure(results)
        if failure is None:
            return ControllerEpoch(current.epoch + 1, results[1].version)
        if isinstance(failure, NodeExistsError | BadVersionError):
            return self._own_controller_epoch(broker_id)
        raise failure

    def _get_or_create_controller_epoch(self) -> ControllerEpoch:
        existing = self.get_controller_epoch()
        if existing is not None:
            return existing
        with contextlib.suppress(NodeExistsError):
            self._zk.create(ControllerEpochZNode.path(), ControllerEpochZNode.encode(0))
        epoch = self.get_controller_epoch()
        if epoch is None:
            raise RuntimeError("/controller_epoch was created and then vanished")
        return epoch

    def _own_controller_epoch(self, broker_id: int) -> ControllerEpoch | None:
        """After a lost race: our epoch if ``/controller`` is ours after all (a retried commit
        that had succeeded before a connection loss), else None."""
        try:
            data, stat = self._zk.get(ControllerZNode.path())
        except NoNodeError:
            return None
        if stat.ephemeralOwner != self.session_id or ControllerZNode.decode(data) != broker_id:
            return None
        return self.get_controller_epoch()

    def delete_controller(self, controller_epoch_zk_version: int) -> None:
        """Resign: delete ``/controller`` — only if no newer controller has been elected."""
        def op(tx: TransactionRequest) -> None:
            tx.delete(ControllerZNode.path())

        with contextlib.suppress(NoNodeError):
            self._fenced_write(op, controller_epoch_zk_version)

    # --- watches ---------------------------------------------------------------------------

    def watch_broker_ids(self, callback: Callable[[list[int]], None]) -> None:
        """Call ``callback`` with the live broker ids now and after every change."""
        ChildrenWatch(
            self._zk, BrokerIdsZNode.path(),
            lambda children: callback(sorted(int(child) for child in children)),
        )

    def watch_controller(self, callback: Callable[[int | None], None]) -> None:
        """Call ``callback`` with the controller's id (None when there is none), now and after
        every change — the cue for a broker to try to become controller."""
        def on_change(data: bytes | None, _stat: Any) -> None:
            callback(ControllerZNode.decode(data) if data else None)

        DataWatch(self._zk, ControllerZNode.path(), on_change)

    def watch_children(self, path: str, callback: Callable[[list[str]], None]) -> None:
        """Call ``callback`` with ``path``'s children now and after every change, e.g.
        ``/isr_change_notification``, ``/brokers/topics`` or ``/admin/delete_topics``."""
        ChildrenWatch(self._zk, path, lambda children: callback(sorted(children)))
