"""Async client for one peer broker: the controller's and the replica fetchers' way to talk.

Kafka's inter-broker traffic goes through NetworkClient: one connection per peer, requests
pipelined on it and matched to responses by correlation id, a request timeout that tears the
connection down (a peer that stops answering one request is not trusted with the others), and
no hidden retries; the caller (controller channel, replica fetcher) owns retry and backoff,
because only it knows whether a retry still makes sense. This is the same contract on asyncio.

The connection is opened lazily by the first request and again by the first request after a
failure. Any failure (connect error, timeout, reset, peer closing) fails every request in flight
on that connection with a BrokerClientError naming the peer and the cause.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import struct
from collections.abc import Mapping
from typing import Any

from harness.wire import protocol

log = logging.getLogger("reference_broker.network.broker_client")

_SIZE = struct.Struct(">i")
# Fetch responses are bounded by replica.fetch.response.max.bytes (10 MiB by default); anything
# far beyond that means the stream is out of step, not a big response.
MAX_RESPONSE_SIZE = 512 * 1024 * 1024
SHUT_TIMEOUT_S = 5.0  # a task that does not end by then is a bug; do not hang on it


class BrokerClientError(Exception):
    """The request did not get a response: connect failure, timeout or lost connection."""


class _Connection:
    """One TCP connection and the requests waiting on it (correlation id → api, version, future)."""

    def __init__(self, label: str, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.label = label
        self.reader = reader
        self.writer = writer
        self.pending: dict[int, tuple[int, int, asyncio.Future]] = {}
        self.receiver: asyncio.Task | None = None
        self.failed = False


class BrokerClient:
    def __init__(self, host: str, port: int, *, client_id: str, request_timeout_s: float = 30.0,
                 connect_timeout_s: float = 5.0) -> None:
        self._host = host
        self._port = port
        self._client_id = client_id
        self._request_timeout_s = request_timeout_s
        self._connect_timeout_s = connect_timeout_s
        self._conn: _Connection | None = None
        self._connect_lock = asyncio.Lock()
        self._correlation_ids = itertools.count()
        self._closers: set[asyncio.Task] = set()  # strong references until each is done
        self._closed = False

    @property
    def address(self) -> tuple[str, int]:
        return self._host, self._port

    @property
    def connected(self) -> bool:
        return self._conn is not None

    def __repr__(self) -> str:
        state = "connected" if self._conn else "idle"
        return f"BrokerClient({self._host}:{self._port}, {self._client_id!r}, {state})"

    def set_address(self, host: str, port: int) -> None:
        """Use a new address from the next connect on; a live connection to the old one closes."""
        if (host, port) == (self._host, self._port):
            return
        old = f"{self._host}:{self._port}"
        self._host, self._port = host, port
        if self._conn is not None:
            self._fail(self._conn, f"address changed to {host}:{port}", None)
        log.debug("broker address %s → %s:%d", old, host, port)

    async def request(self, api_key: int, version: int, body: Mapping | Any, *,
                      timeout_s: float | None = None) -> Any:
        """Send one request and return the decoded kio response entity.

        `body` is a kio entity or a plain dict (built for `version`). Every request must get a
        response (so no acks=0 produce). Raises BrokerClientError when none arrives.
        """
        if self._closed:
            raise BrokerClientError(f"{self._host}:{self._port}: client is closed")
        correlation_id = next(self._correlation_ids) & 0x7FFFFFFF
        frame = protocol.encode_request(api_key=api_key, api_version=version,
                                        correlation_id=correlation_id,
                                        client_id=self._client_id, body=body)
        conn = await self._connection()
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        conn.pending[correlation_id] = (api_key, version, future)
        try:
            conn.writer.write(frame)
            await conn.writer.drain()
        except (OSError, RuntimeError) as exc:  # RuntimeError: transport closed under us
            self._fail(conn, f"write failed: {exc}", exc)
        timeout = self._request_timeout_s if timeout_s is None else timeout_s
        try:
            return await asyncio.wait_for(future, timeout)
        except TimeoutError:
            what = (f"{protocol.api_name(api_key)} v{version} (correlation id {correlation_id})"
                    f" got no response within {timeout:g}s")
            self._fail(conn, what, None)
            raise BrokerClientError(f"{conn.label}: {what}") from None

    async def close(self) -> None:
        """Fail what is in flight, close the connection; later requests raise BrokerClientError."""
        self._closed = True
        if self._conn is not None:
            self._fail(self._conn, "client closed", None)
        while self._closers:
            await asyncio.gather(*self._closers)

    # --- connection management -----------------------------------------------------------------

    async def _connection(self) -> _Connection:
        conn = self._conn
        if conn is not None:
            return conn
        async with self._connect_lock:  # concurrent first requests share one connect
            if self._conn is not None:
                return self._conn
            host, port = self._host, self._port
            label = f"{host}:{port}"
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(host, port), self._connect_timeout_s)
            except TimeoutError:
                raise BrokerClientError(
                    f"{label}: connect timed out after {self._connect_timeout_s:g}s") from None
            except OSError as exc:
                raise BrokerClientError(f"{label}: connect failed: {exc}") from exc
            conn = _Connection(label, reader, writer)
            if self._closed or (host, port) != (self._host, self._port):
                await self._shut(conn)
                why = "client closed" if self._closed else "address changed"
                raise BrokerClientError(f"{label}: {why} while connecting")
            conn.receiver = asyncio.get_running_loop().create_task(
                self._receive(conn), name=f"broker-client-{label}")
            self._conn = conn
            log.debug("connected to %s as %s", label, self._client_id)
            return conn

    async def _receive(self, conn: _Connection) -> None:
        """Read responses in a loop and complete the matching requests."""
        try:
            while True:
                (size,) = _SIZE.unpack(await conn.reader.readexactly(4))
                if not 4 <= size <= MAX_RESPONSE_SIZE:
                    self._fail(conn, f"bad response size {size}", None)
                    return
                self._complete(conn, await conn.reader.readexactly(size))
                if conn.failed:
                    return
        except asyncio.IncompleteReadError:
            self._fail(conn, "connection closed by peer", None)
        except OSError as exc:
            self._fail(conn, f"connection lost: {exc}", exc)
        except Exception as exc:  # a bug here must still release the waiting callers
            log.exception("receiving from %s failed", conn.label)
            self._fail(conn, f"receive failed: {type(exc).__name__}: {exc}", exc)

    def _complete(self, conn: _Connection, frame: bytes) -> None:
        (correlation_id,) = _SIZE.unpack_from(frame, 0)
        entry = conn.pending.pop(correlation_id, None)
        if entry is None:
            # Responses come back in request order, so an unknown id means a broken stream.
            self._fail(conn, f"response with unknown correlation id {correlation_id}", None)
            return
        api_key, version, future = entry
        if future.done():  # the caller gave up (cancelled)
            return
        try:
            _, body = protocol.decode_response(api_key, version, frame)
        except Exception as exc:  # kio raises assorted errors on bad input
            future.set_exception(BrokerClientError(
                f"{conn.label}: undecodable {protocol.api_name(api_key)} v{version} response: "
                f"{type(exc).__name__}: {exc}"))
            return
        future.set_result(body)

    def _fail(self, conn: _Connection, reason: str, cause: BaseException | None) -> None:
        """Drop `conn`: every request in flight on it fails; the next request reconnects."""
        if conn.failed:
            return
        conn.failed = True
        if self._conn is conn:
            self._conn = None
        pending, conn.pending = conn.pending, {}
        for api_key, version, future in pending.values():
            if not future.done():
                error = BrokerClientError(
                    f"{conn.label}: {protocol.api_name(api_key)} v{version} failed: {reason}")
                error.__cause__ = cause
                future.set_exception(error)
        log.debug("dropping connection to %s: %s (%d in flight)", conn.label, reason,
                  len(pending))
        conn.writer.transport.abort()
        if conn.receiver is not None and conn.receiver is not asyncio.current_task():
            conn.receiver.cancel()
        closer = asyncio.get_running_loop().create_task(self._shut(conn))
        self._closers.add(closer)
        closer.add_done_callback(self._closers.discard)

    @staticmethod
    async def _shut(conn: _Connection) -> None:
        """Wait until the receiver task and the socket are really gone (no leaks, no warnings).

        The socket is aborted, not closed: a failed connection has nothing worth flushing, and
        a graceful close would wait for a peer that stopped reading (a paused broker) forever.
        """
        conn.writer.transport.abort()
        if conn.receiver is not None and conn.receiver is not asyncio.current_task():
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(conn.receiver, SHUT_TIMEOUT_S)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(conn.writer.wait_closed(), SHUT_TIMEOUT_S)
