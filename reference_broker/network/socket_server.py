"""Asyncio accept/read/write: framing limits, per-connection ordering, and bad-peer isolation.

Kafka's SocketServer mutes a channel while a request is processed; here requests of one
connection may complete out of order (a delayed fetch waits while a metadata request finishes),
so each connection keeps a queue of slots and writes responses strictly in request order.
Anything a peer sends that cannot be processed closes that one connection with a single log line.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, cast

from harness.wire.framing import FrameDecoder
from harness.wire.protocol import ProtocolError
from reference_broker.log import log_dir_failure

log = logging.getLogger("reference_broker.network")

# (frame, connection) -> encoded response (see Payload), or an awaitable of one.
FrameHandler = Callable[[bytes, "ConnectionInfo"], "Payload | Awaitable[Payload]"]

MAX_PENDING = 64
# Payload types answered at once; only other results are checked for awaitability (the ABC
# checks of inspect.isawaitable cost more per request than the rest of this layer).
_PLAIN_PAYLOADS = (bytes, list, type(None))


@dataclass
class ConnectionInfo:
    peer: str
    listener: str
    id: int


# An encoded response: bytes, chunks (bytes and file regions with file/position/size), or None
# when the request gets no response (acks=0 produce).
Payload = bytes | list[Any] | None


@dataclass
class _Slot:
    done: bool = False
    payload: Payload = None
    task: asyncio.Task | None = field(default=None, repr=False)


class KafkaConnection(asyncio.Protocol):
    def __init__(self, server: SocketServer, listener: str) -> None:
        self._server = server
        self._listener = listener
        self._decoder = FrameDecoder(server.max_request_size)
        self._pending: deque[_Slot] = deque()
        self._outbox: deque = deque()
        self._sender: asyncio.Future | None = None
        self._transport: asyncio.Transport | None = None
        self._socket_fd = -1
        self._reading_paused = False
        self._writing_paused = False
        self._closed = False
        self.info = ConnectionInfo("?", listener, 0)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        sock = transport.get_extra_info("socket")
        self._socket_fd = sock.fileno() if sock is not None else -1
        peer = transport.get_extra_info("peername")
        self.info = ConnectionInfo(
            f"{peer[0]}:{peer[1]}" if peer else "?", self._listener, self._server.next_id()
        )
        self._server.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._server.connections.discard(self)
        if self._decoder.pending_partial():
            log.info("Connection from %s closed in the middle of a request", self.info.peer)
        for slot in self._pending:
            if slot.task is not None:
                slot.task.cancel()
        self._pending.clear()
        self._outbox.clear()
        if self._sender is not None:
            self._sender.cancel()

    def data_received(self, data: bytes) -> None:
        if self._closed:
            return
        try:
            frames = self._decoder.feed(data)
        except ProtocolError as exc:
            self.close_with_reason(str(exc))
            return
        for frame in frames:
            if self._closed:
                return
            self._dispatch(frame)
        self._update_reading()

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._update_reading()

    def close_with_reason(self, reason: str) -> None:
        if self._closed:
            return
        log.warning("Closing connection from %s: %s", self.info.peer, reason)
        self._closed = True
        if self._transport is not None:
            self._transport.abort()

    def _dispatch(self, frame: bytes) -> None:
        slot = _Slot()
        self._pending.append(slot)
        try:
            result = self._server.handler(frame, self.info)
        except ProtocolError as exc:
            self.close_with_reason(str(exc))
            return
        except Exception as exc:
            log_dir_failure.handle(exc, "handling a request")  # halts if the disk failed
            log.exception("Unexpected error handling a request from %s", self.info.peer)
            self.close_with_reason("internal error while handling the request")
            return
        if type(result) in _PLAIN_PAYLOADS or not inspect.isawaitable(result):
            self._complete(slot, cast(Payload, result))
        else:
            slot.task = asyncio.ensure_future(result)
            slot.task.add_done_callback(lambda task: self._task_done(slot, task))

    def _task_done(self, slot: _Slot, task: asyncio.Task) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            if isinstance(exc, ProtocolError):
                self.close_with_reason(str(exc))
            else:
                log_dir_failure.handle(exc, "handling a request")  # halts if the disk failed
                log.error("Unexpected error handling a request from %s", self.info.peer,
                          exc_info=exc)
                self.close_with_reason("internal error while handling the request")
            return
        self._complete(slot, task.result())

    def _complete(self, slot: _Slot, payload: Payload) -> None:
        slot.done = True
        slot.payload = payload
        while self._pending and self._pending[0].done:
            head = self._pending.popleft()
            if head.payload is None or self._closed or self._transport is None:
                continue
            if isinstance(head.payload, bytes) and self._sender is None:
                self._transport.write(head.payload)
                continue
            chunks = [head.payload] if isinstance(head.payload, bytes) else head.payload
            if self._sender is None:
                chunks = self._send_now(chunks)
            if chunks:
                self._outbox.extend(chunks)
                if self._sender is None:
                    self._sender = asyncio.ensure_future(self._send_outbox())
        self._update_reading()

    def _send_now(self, chunks: list[Any]) -> list[Any]:
        """Send what can go out at once, in order; returns the chunks left for the sender.

        A file region is sent here with os.sendfile on the socket when nothing waits in the
        transport's buffer (so the order on the wire holds): a whole Fetch response then costs
        one sendfile call, where asyncio's loop.sendfile adds a drain wait, a pause and resume of
        reading and a writer registration — each one more wake-up of the event loop, which a
        busy machine makes expensive. A region the socket cannot take whole goes to the sender
        from where it stopped.
        """
        assert self._transport is not None
        for i, chunk in enumerate(chunks):
            if isinstance(chunk, bytes):
                self._transport.write(chunk)
                continue
            if self._transport.get_write_buffer_size() or self._socket_fd < 0:
                return chunks[i:]
            sent = 0
            try:
                while sent < chunk.size:
                    done = os.sendfile(self._socket_fd, chunk.file.fileno(),
                                       chunk.position + sent, chunk.size - sent)
                    if done == 0:
                        raise OSError(f"{chunk.file} ended early")
                    sent += done
            except BlockingIOError:
                pass
            except (OSError, ValueError) as exc:
                self.close_with_reason(f"send failed: {exc}")
                return []
            if sent < chunk.size:
                rest = replace(chunk, position=chunk.position + sent, size=chunk.size - sent)
                return [rest, *chunks[i + 1:]]
        return []

    async def _send_outbox(self) -> None:
        """Write queued chunks in order; file regions go out with sendfile (zero copy)."""
        loop = asyncio.get_running_loop()
        try:
            while self._outbox and not self._closed and self._transport is not None:
                chunk = self._outbox.popleft()
                if isinstance(chunk, bytes):
                    self._transport.write(chunk)
                    continue
                try:
                    await loop.sendfile(self._transport, chunk.file, chunk.position, chunk.size,
                                        fallback=False)
                except asyncio.SendfileNotAvailableError:
                    self._transport.write(chunk.read_bytes())
        except (ConnectionError, OSError) as exc:
            log_dir_failure.handle(exc, "reading a log segment")  # a socket's errors return
            self.close_with_reason(f"send failed: {exc}")
        finally:
            self._sender = None
            if self._closed:
                self._outbox.clear()
            self._update_reading()

    def _update_reading(self) -> None:
        if self._transport is None or self._closed:
            return
        should_pause = (self._writing_paused or len(self._pending) >= MAX_PENDING
                        or len(self._outbox) >= MAX_PENDING)
        if should_pause and not self._reading_paused:
            self._transport.pause_reading()
            self._reading_paused = True
        elif not should_pause and self._reading_paused:
            self._transport.resume_reading()
            self._reading_paused = False


class SocketServer:
    """Binds every listener and hands complete frames to the request handler."""

    def __init__(self, handler: FrameHandler, max_request_size: int) -> None:
        self.handler = handler
        self.max_request_size = max_request_size
        self.connections: set[KafkaConnection] = set()
        self._servers: list[asyncio.base_events.Server] = []
        self._next_id = 0

    def next_id(self) -> int:
        self._next_id += 1
        return self._next_id

    async def bind(self, name: str, host: str, port: int) -> int:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(
            lambda: KafkaConnection(self, name), host or None, port, reuse_address=True,
            backlog=512,
        )
        self._servers.append(server)
        bound = server.sockets[0].getsockname()[1]
        log.info("Listening on %s://%s:%d", name, host, bound)
        return bound

    async def shutdown(self) -> None:
        for server in self._servers:
            server.close()
        for conn in list(self.connections):
            if conn._transport is not None:
                conn._transport.close()
        for server in self._servers:
            await server.wait_closed()
