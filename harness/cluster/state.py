"""Cluster state — controller, its epoch, registrations, each partition's leader and ISR — read
through one interface, whoever stores it.

The suites assert on these facts, so they are read from where the cluster itself keeps them,
never from the broker under test's own opinion: in ZooKeeper mode the znodes Kafka's controller
writes (``/controller``, ``/controller_epoch``, ``/brokers/ids/[id]``,
``/brokers/topics/[t]/partitions/[p]/state``), read with kazoo as an operator's tooling would;
without ZooKeeper (KRaft), the Admin API (DescribeCluster and Metadata), which is the only
public view a KRaft cluster offers.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from typing import Any, Protocol

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from harness.raw_client import raw_metadata

_DEFAULT_TIMEOUT_S = 10.0


class ClusterState(Protocol):
    """The facts about a cluster the failover and unclean suites assert on."""

    def controller_id(self) -> int | None: ...

    def controller_epoch(self) -> int | None: ...

    def cluster_id(self) -> str | None: ...

    def registered_broker_ids(self) -> list[int]: ...

    def broker_registration(self, broker_id: int) -> dict[str, Any] | None: ...

    def partition_state(self, topic: str, partition: int) -> dict[str, Any] | None: ...

    def partition_states(self, *, internal: bool = False) -> dict[str, dict[str, Any]]: ...

    def leader(self, topic: str, partition: int) -> int | None: ...

    def close(self) -> None: ...


class ZooKeeperState:
    """The state a ZooKeeper-mode cluster keeps in its znodes, through one kazoo client kept
    for the cluster's lifetime (opened on the first read, reopened after :meth:`close`)."""

    def __init__(self, hosts: str, timeout: float = _DEFAULT_TIMEOUT_S) -> None:
        self.hosts = hosts
        self.timeout = timeout
        self._client: KazooClient | None = None
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def session(self, timeout: float = _DEFAULT_TIMEOUT_S) -> Iterator[KazooClient]:
        """A fresh, started kazoo client of its own, closed on exit (for watches and writes)."""
        client = KazooClient(hosts=self.hosts, timeout=timeout)
        client.start(timeout=timeout)
        try:
            yield client
        finally:
            client.stop()
            client.close()

    def _reader(self) -> KazooClient:
        with self._lock:
            if self._client is None:
                client = KazooClient(hosts=self.hosts, timeout=self.timeout)
                client.start(timeout=self.timeout)
                self._client = client
            return self._client

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):  # a client of a dead server may complain
                client.stop()
                client.close()

    def get(self, path: str) -> bytes | None:
        """The data at ``path``, None if there is no such znode."""
        try:
            data, _ = self._reader().get(path)
        except NoNodeError:
            return None
        return data

    def get_json(self, path: str) -> dict[str, Any] | None:
        data = self.get(path)
        return None if data is None else json.loads(data)

    def controller_id(self) -> int | None:
        """``brokerid`` of ``/controller``, None while no broker is controller."""
        document = self.get_json("/controller")
        return None if document is None else int(document["brokerid"])

    def controller_epoch(self) -> int | None:
        """``/controller_epoch`` (plain text), None before the first election."""
        data = self.get("/controller_epoch")
        return None if data is None else int(data)

    def cluster_id(self) -> str | None:
        document = self.get_json("/cluster/id")
        return None if document is None else document["id"]

    def registered_broker_ids(self) -> list[int]:
        try:
            return sorted(int(child) for child in self._reader().get_children("/brokers/ids"))
        except NoNodeError:
            return []

    def broker_registration(self, broker_id: int) -> dict[str, Any] | None:
        """``/brokers/ids/[id]`` as JSON, None while the broker is not registered."""
        return self.get_json(f"/brokers/ids/{broker_id}")

    def partition_state(self, topic: str, partition: int) -> dict[str, Any] | None:
        """``/brokers/topics/[topic]/partitions/[partition]/state`` as JSON, None if absent."""
        return self.get_json(f"/brokers/topics/{topic}/partitions/{partition}/state")

    def leader(self, topic: str, partition: int) -> int | None:
        """The partition's leader; None if no state yet or no leader (-1)."""
        return leader_of(self.partition_state(topic, partition))

    def partition_states(self, *, internal: bool = False) -> dict[str, dict[str, Any]]:
        """``topic/partition`` -> its state, for every topic (``__``-prefixed internal ones only
        when asked: ``__consumer_offsets`` alone has 50 partitions)."""
        reader = self._reader()
        states: dict[str, dict[str, Any]] = {}
        try:
            topics = sorted(reader.get_children("/brokers/topics"))
        except NoNodeError:
            return states
        for topic in topics:
            if topic.startswith("__") and not internal:
                continue
            try:
                partitions = reader.get_children(f"/brokers/topics/{topic}/partitions")
            except NoNodeError:
                continue  # created, not yet assigned by the controller
            for partition in sorted(int(p) for p in partitions):
                state = self.partition_state(topic, partition)
                if state is not None:
                    states[f"{topic}/{partition}"] = state
        return states


class ZooKeeperStateReads:
    """The cluster-state questions a backend answers from ZooKeeper, for the backends to share:
    each provides :attr:`state` (kept in ``_state``), these delegate to :attr:`reads`, which is
    that state unless a backend without ZooKeeper answers otherwise."""

    _state: ZooKeeperState | None = None

    @property
    def state(self) -> ZooKeeperState:
        raise NotImplementedError

    @property
    def reads(self) -> ClusterState:
        return self.state

    def zk(self, timeout: float = _DEFAULT_TIMEOUT_S) -> contextlib.AbstractContextManager[
            KazooClient]:
        """A fresh, started kazoo client on the cluster's ZooKeeper, closed on exit."""
        return self.state.session(timeout)

    def _close_reader(self) -> None:
        if self._state is not None:
            state, self._state = self._state, None
            state.close()

    def broker_registration(self, broker_id: int) -> dict[str, Any] | None:
        return self.reads.broker_registration(broker_id)

    def registered_broker_ids(self) -> list[int]:
        return self.reads.registered_broker_ids()

    def controller_id(self) -> int | None:
        return self.reads.controller_id()

    def controller_epoch(self) -> int | None:
        return self.reads.controller_epoch()

    def cluster_id(self) -> str | None:
        return self.reads.cluster_id()

    def partition_state(self, topic: str, partition: int) -> dict[str, Any] | None:
        return self.reads.partition_state(topic, partition)

    def leader(self, topic: str, partition: int) -> int | None:
        return self.reads.leader(topic, partition)


class AdminState:
    """The state a cluster without ZooKeeper shows through the Admin API.

    ``partition_state`` has ZooKeeper's shape (``leader``, ``isr``) so the same assertions read
    both; what the Admin API does not show (the controller epoch, the leader epoch) is None.

    Reading must not change what is read: librdkafka's admin client asks for a topic's metadata
    with auto-creation allowed (its producer-side default), and Apache Kafka 4 then created the
    topic it was asked about — a later read found a topic no one had made. A topic's state is
    therefore asked for with a raw Metadata request that forbids auto-creation.
    """

    def __init__(self, bootstrap: str, timeout: float = _DEFAULT_TIMEOUT_S) -> None:
        from confluent_kafka.admin import AdminClient

        self.timeout = timeout
        self.bootstrap = bootstrap
        self._admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0,
                                   "allow.auto.create.topics": False})

    def close(self) -> None:
        """Nothing to release: the client's threads end with it."""

    def controller_id(self) -> int | None:
        described = self._admin.describe_cluster(request_timeout=self.timeout).result()
        controller = described.controller
        return None if controller is None or controller.id < 0 else int(controller.id)

    def controller_epoch(self) -> int | None:
        return None

    def cluster_id(self) -> str | None:
        return self._admin.describe_cluster(request_timeout=self.timeout).result().cluster_id

    def registered_broker_ids(self) -> list[int]:
        return sorted(self._admin.list_topics(timeout=self.timeout).brokers)

    def broker_registration(self, broker_id: int) -> dict[str, Any] | None:
        brokers = self._admin.list_topics(timeout=self.timeout).brokers
        broker = brokers.get(broker_id)
        return None if broker is None else {"host": broker.host, "port": broker.port}

    def partition_state(self, topic: str, partition: int) -> dict[str, Any] | None:
        """Asked with a raw Metadata request that forbids auto-creation: librdkafka's admin
        client is a producer underneath, and even with ``allow.auto.create.topics`` false
        Apache Kafka 4 auto-created the topic asked about in 2 of 8 CI runs."""
        return self._states(self._metadata([topic])).get(f"{topic}/{partition}")

    def partition_states(self, *, internal: bool = False) -> dict[str, dict[str, Any]]:
        """``topic/partition`` -> its state, for every topic (internal ones when asked)."""
        return self._states(self._metadata(None), internal=internal)

    def _metadata(self, topics: list[str] | None) -> Any:
        for address in self.bootstrap.split(","):
            host, _, port = address.strip().rpartition(":")
            try:
                return raw_metadata(host, int(port), topics, timeout=self.timeout,
                                    client_id="kafka-harness-state")
            except OSError:
                continue  # that broker is down: ask the next one
        raise ConnectionError(f"no broker of {self.bootstrap} answered Metadata")

    @staticmethod
    def _states(metadata: Any, *, internal: bool = True) -> dict[str, dict[str, Any]]:
        return {f"{topic.name}/{p.partition_index}": {
                    "leader": p.leader_id, "isr": list(p.isr_nodes),
                    "replicas": list(p.replica_nodes), "leader_epoch": None}
                for topic in metadata.topics
                if topic.error_code.value == 0 and (internal or not topic.is_internal)
                for p in topic.partitions}

    def leader(self, topic: str, partition: int) -> int | None:
        return leader_of(self.partition_state(topic, partition))


def leader_of(state: dict[str, Any] | None) -> int | None:
    """A partition state's leader, None when it has none (``-1``) or there is no state."""
    if state is None or state["leader"] < 0:
        return None
    return int(state["leader"])
