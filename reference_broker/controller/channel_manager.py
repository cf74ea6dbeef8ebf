"""The controller's connections to the brokers: one ordered queue and one sender per broker.

Requests to one broker are sent one after another in the order the controller decided them —
a LeaderAndIsr must not overtake the one before it — while a slow or unreachable broker delays
nobody else. A request that fails (connection refused, timeout, peer closed) is retried with
backoff until it succeeds, the broker is removed (it died: the controller will decide again
when it returns) or the controller resigns.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from reference_broker.controller.request_batch import BrokerRequest, inter_broker_endpoint
from reference_broker.network.broker_client import BrokerClient, BrokerClientError
from reference_broker.network.tasks import cancel_and_wait
from reference_broker.zk.broker_znodes import BrokerInfo

log = logging.getLogger("reference_broker.controller.channel")

ResponseCallback = Callable[[BrokerRequest, Any], None]


class Client(Protocol):
    """What the channel needs of :class:`BrokerClient` (tests may hand in their own)."""

    def set_address(self, host: str, port: int) -> None: ...
    async def request(self, api_key: int, version: int, body: Any) -> Any: ...
    async def close(self) -> None: ...


ClientFactory = Callable[[str, int], Client]


@dataclass
class _BrokerChannel:
    broker_id: int
    client: Client
    queue: asyncio.Queue[tuple[BrokerRequest, ResponseCallback | None]]
    sender: asyncio.Task[None]


class ControllerChannelManager:
    """Channels to the live brokers of one controller epoch.

    ``peer_addresses`` (``broker.peer.addresses``) override where broker N is reached — the
    harness routes each link through its own proxy; otherwise the broker's registered
    endpoint of ``listener_name`` (the inter-broker listener) is used.
    """

    def __init__(
        self,
        controller_id: int,
        *,
        peer_addresses: Mapping[int, tuple[str, int]] | None = None,
        listener_name: str | None = None,
        request_timeout_s: float = 30.0,
        retry_backoff_s: float = 0.1,
        client_factory: ClientFactory | None = None,
    ) -> None:
        self.controller_id = controller_id
        self._peer_addresses = dict(peer_addresses or {})
        self._listener_name = listener_name
        self._retry_backoff_s = retry_backoff_s
        self._client_factory = client_factory or (
            lambda host, port: BrokerClient(
                host, port, client_id=f"controller-{controller_id}",
                request_timeout_s=request_timeout_s,
            )
        )
        self._channels: dict[int, _BrokerChannel] = {}

    @property
    def broker_ids(self) -> set[int]:
        return set(self._channels)

    def address_of(self, info: BrokerInfo) -> tuple[str, int]:
        override = self._peer_addresses.get(info.broker_id)
        if override is not None:
            return override
        endpoint = inter_broker_endpoint(info, self._listener_name)
        return endpoint.host, endpoint.port

    def add_broker(self, info: BrokerInfo) -> None:
        """Open (lazily) a channel to a broker; a known broker only gets its address updated."""
        host, port = self.address_of(info)
        existing = self._channels.get(info.broker_id)
        if existing is not None:
            existing.client.set_address(host, port)
            return
        client = self._client_factory(host, port)
        queue: asyncio.Queue[tuple[BrokerRequest, ResponseCallback | None]] = asyncio.Queue()
        sender = asyncio.get_running_loop().create_task(
            self._send_loop(info.broker_id, client, queue),
            name=f"controller-channel-{info.broker_id}",
        )
        self._channels[info.broker_id] = _BrokerChannel(info.broker_id, client, queue, sender)

    async def remove_broker(self, broker_id: int) -> None:
        """Drop a dead broker's channel with whatever it still had queued."""
        channel = self._channels.pop(broker_id, None)
        if channel is not None:
            await self._close(channel)

    def send(self, request: BrokerRequest, callback: ResponseCallback | None = None) -> None:
        """Queue ``request``; ``callback(request, response)`` runs on the loop once answered.
        Requests for a broker without a channel (not live) are dropped."""
        channel = self._channels.get(request.broker_id)
        if channel is None:
            log.debug("dropping %s for broker %d: no channel", request.api_key, request.broker_id)
            return
        channel.queue.put_nowait((request, callback))

    async def shutdown(self) -> None:
        channels = list(self._channels.values())
        self._channels.clear()
        for channel in channels:
            await self._close(channel)

    @staticmethod
    async def _close(channel: _BrokerChannel) -> None:
        await cancel_and_wait(channel.sender)
        await channel.client.close()

    async def _send_loop(
        self,
        broker_id: int,
        client: Client,
        queue: asyncio.Queue[tuple[BrokerRequest, ResponseCallback | None]],
    ) -> None:
        while True:
            request, callback = await queue.get()
            response = await self._send_until_answered(broker_id, client, request)
            if response is not None and callback is not None:
                try:
                    callback(request, response)
                except Exception:
                    log.exception("handling the response of broker %d failed", broker_id)

    async def _send_until_answered(self, broker_id: int, client: Client,
                                   request: BrokerRequest) -> Any:
        failures = 0
        while True:
            try:
                return await client.request(request.api_key, request.version, request.body)
            except (BrokerClientError, OSError, TimeoutError) as exc:
                failures += 1
                level = logging.WARNING if failures == 1 else logging.DEBUG
                log.log(level, "controller %d: request (api %d) to broker %d failed, retrying: "
                        "%s", self.controller_id, request.api_key, broker_id, exc)
                await asyncio.sleep(min(self._retry_backoff_s * failures, 1.0))
            except Exception:
                log.exception("controller %d: request (api %d) to broker %d cannot be sent; "
                              "dropped", self.controller_id, request.api_key, broker_id)
                return None
