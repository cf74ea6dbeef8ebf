"""One-at-a-time processing of a connection's group requests, as Kafka processes every request.

Kafka mutes a connection while one of its requests is being handled. This broker lets a
connection's requests overlap instead (a parked fetch must not hold up a metadata request; the
socket server still answers in request order). For the group protocol the overlap changes the
meaning of a request: a Heartbeat pipelined behind a parked JoinGroup would be judged against the
rebalance that JoinGroup is about to complete, answer REBALANCE_IN_PROGRESS, and send the member
(kafka-python's heartbeat thread does exactly this) into another, endless round of rebalances.
So group requests of one connection run strictly one after another, as they would on Kafka.
Produce requests use an order of their own for their appends (``apis/produce.py`` says why).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any


class ConnectionOrder:
    def __init__(self) -> None:
        self._tails: dict[int, asyncio.Future[Any]] = {}

    def idle(self, connection_id: int) -> bool:
        """Whether nothing of this connection is in flight here: an action run now would run
        at once."""
        tail = self._tails.get(connection_id)
        return tail is None or tail.done()

    def run(self, connection_id: int, action: Callable[[], Any]) -> Any:
        """`action()` now if nothing of this connection is in flight, else after it finishes.
        Returns the action's result, or an awaitable of it."""
        tail = self._tails.get(connection_id)
        if tail is None or tail.done():
            result = action()
            if not inspect.isawaitable(result):
                return result
            return self._track(connection_id, asyncio.ensure_future(result))
        return self._track(connection_id, asyncio.ensure_future(_after(tail, action)))

    def _track(self, connection_id: int, future: asyncio.Future[Any]) -> asyncio.Future[Any]:
        self._tails[connection_id] = future

        def forget(done: asyncio.Future[Any]) -> None:
            if self._tails.get(connection_id) is done:
                del self._tails[connection_id]

        future.add_done_callback(forget)
        return future


async def _after(previous: asyncio.Future[Any], action: Callable[[], Any]) -> Any:
    await asyncio.wait([previous])  # its outcome is its own request's business
    result = action()
    if inspect.isawaitable(result):
        result = await result
    return result
