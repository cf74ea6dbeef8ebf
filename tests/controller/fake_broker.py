"""In-process stand-ins for brokers: a ZooKeeper registration plus a protocol endpoint that
records the controller's requests, and a small cluster harness running real controllers."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from harness.wire.framing import FrameDecoder
from harness.wire.protocol import decode_request, encode_response, to_plain
from reference_broker.config import KafkaConfig
from reference_broker.controller.kafka_controller import KafkaController
from reference_broker.log.topic_partition import TopicPartition
from reference_broker.zk.broker_znodes import BrokerInfo, EndPoint
from reference_broker.zk.kafka_zk_client import KafkaZkClient
from reference_broker.zk.topic_znodes import LeaderIsrAndControllerEpoch

LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA = 4, 5, 6
T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T], timeout: float = 60) -> T:
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def eventually(condition: Callable[[], Any], timeout: float = 15.0) -> Any:
    """Poll ``condition`` (may block briefly: it runs in a thread) until it returns truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = await asyncio.to_thread(condition)
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)


class FakeBroker:
    """A broker endpoint that records requests; registered in ZooKeeper by its own session."""

    def __init__(self, broker_id: int, zk_connect: str) -> None:
        self.broker_id = broker_id
        self.zk_connect = zk_connect
        self.requests: list[tuple[int, dict[str, Any]]] = []
        self.zk: KafkaZkClient | None = None
        self.broker_epoch = -1
        self.port = 0
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        await asyncio.to_thread(self.register)

    def register(self) -> None:
        self.zk = KafkaZkClient(self.zk_connect, session_timeout_ms=4000).start()
        info = BrokerInfo(self.broker_id, (EndPoint("PLAINTEXT", "127.0.0.1", self.port),))
        self.broker_epoch = self.zk.register_broker(info)

    async def kill(self) -> None:
        """Die: the registration (ZooKeeper session) and the endpoint go away at once."""
        if self.zk is not None:
            await asyncio.to_thread(self.zk.close)
            self.zk = None
        if self._server is not None:
            self._server.close()
            for writer in list(self._connections):
                writer.close()
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._connections.add(writer)
        decoder = FrameDecoder(100 * 1024 * 1024)
        try:
            while data := await reader.read(65536):
                for frame in decoder.feed(data):
                    request = decode_request(frame)
                    body = to_plain(request.body)
                    self.requests.append((request.api_key, body))
                    writer.write(encode_response(request.api_key, request.api_version,
                                                 request.correlation_id, _answer(request.api_key,
                                                                                 body)))
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._connections.discard(writer)
            writer.close()

    def of(self, api_key: int) -> list[dict[str, Any]]:
        return [body for key, body in self.requests if key == api_key]

    def partition_states(self, api_key: int, tp: TopicPartition) -> list[dict[str, Any]]:
        """Every state of ``tp`` this broker was sent in requests of ``api_key``, in order."""
        found = []
        for body in self.of(api_key):
            for topic in body["topic_states"]:
                if topic["topic_name"] == tp.topic:
                    found += [p for p in topic["partition_states"]
                              if p["partition_index"] == tp.partition]
        return found


def _answer(api_key: int, body: dict[str, Any]) -> dict[str, Any]:
    if api_key in (LEADER_AND_ISR, STOP_REPLICA):
        errors = [{"topic_name": t["topic_name"], "partition_index": p["partition_index"],
                   "error_code": 0}
                  for t in body["topic_states"] for p in t["partition_states"]]
        return {"error_code": 0, "partition_errors": errors}
    return {"error_code": 0}


class Cluster:
    """Fake brokers with a real controller each (a controller lives in every broker)."""

    def __init__(self, zk_connect: str, **config: str) -> None:
        self.zk_connect = zk_connect
        self.config = {"auto.leader.rebalance.enable": "false", **config}
        self.brokers: dict[int, FakeBroker] = {}
        self.controllers: dict[int, KafkaController] = {}
        self.admin = KafkaZkClient(zk_connect, session_timeout_ms=4000).start()

    async def add_broker(self, broker_id: int, *, controller: bool = True) -> FakeBroker:
        broker = FakeBroker(broker_id, self.zk_connect)
        await broker.start()
        self.brokers[broker_id] = broker
        if controller:
            await self.start_controller(broker_id)
        return broker

    async def start_controller(self, broker_id: int) -> KafkaController:
        broker = self.brokers[broker_id]
        assert broker.zk is not None
        config = KafkaConfig({"broker.id": str(broker_id), "zookeeper.connect": self.zk_connect,
                              "listeners": f"PLAINTEXT://127.0.0.1:{broker.port}",
                              **self.config})
        controller = KafkaController(config, broker.zk, broker.broker_epoch)
        await controller.startup()
        self.controllers[broker_id] = controller
        return controller

    async def kill(self, broker_id: int) -> None:
        controller = self.controllers.pop(broker_id, None)
        broker = self.brokers.pop(broker_id)
        await broker.kill()  # the session ends first: no graceful resignation
        if controller is not None:
            await controller.shutdown()

    def active(self) -> KafkaController | None:
        active = [c for c in self.controllers.values() if c.is_active]
        return active[0] if len(active) == 1 else None

    async def wait_active(self) -> KafkaController:
        return await eventually(self.active)

    def state(self, tp: TopicPartition) -> LeaderIsrAndControllerEpoch | None:
        found = self.admin.get_partition_state(tp)
        return found[0] if found else None

    async def close(self) -> None:
        for broker_id in list(self.brokers):
            controller = self.controllers.pop(broker_id, None)
            if controller is not None:
                await controller.shutdown()
            await self.brokers.pop(broker_id).kill()
        await asyncio.to_thread(self.admin.close)


async def with_cluster(zk_connect: str, body: Callable[[Cluster], Awaitable[None]],
                       **config: str) -> None:
    cluster = Cluster(zk_connect, **config)
    try:
        await body(cluster)
    finally:
        with contextlib.suppress(Exception):
            await cluster.close()
