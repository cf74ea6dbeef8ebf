"""A named proxy: a loopback listener, its live connections, and its toxics.

Enabled means listening; disabling closes the listener *and* every live connection, which is
how Toxiproxy models a link that is down. Re-enabling listens on the same address: once bound,
``listen`` holds the concrete port even if ``:0`` was asked for, so clients that learnt the
address keep using it.

Both ends must be loopback addresses, or addresses in a private network the server was told to
allow (``--allow-network``: the docker backend's own network, where the proxy runs in a container
next to the brokers). The harness only ever proxies processes it runs itself, and a listener that
any host can reach, forwarding to any host, is an open relay.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ipaddress
import logging
from http import HTTPStatus

from harness.net.api_error import (
    ApiError,
    bind_failed,
    toxic_already_exists,
    toxic_not_found,
)
from harness.net.link import Connection
from harness.net.toxics import Stream, Toxic, toxic_updated

DEFAULT_LISTEN = "127.0.0.1:0"
DIAL_TIMEOUT_SECONDS = 10.0

log = logging.getLogger(__name__)


# Private networks besides loopback that proxies may listen on and dial (see allow_network).
_ALLOWED_NETWORKS: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []


def allow_network(cidr: str) -> None:
    """Also allow addresses in `cidr`, which must be a private network (ValueError otherwise)."""
    network = ipaddress.ip_network(cidr, strict=False)
    if not network.is_private or network.prefixlen == 0:
        raise ValueError(f"--allow-network {cidr!r} is not a private network (e.g. a docker "
                         "network such as 172.18.0.0/16)")
    _ALLOWED_NETWORKS.append(network)


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (an IP literal or ``localhost``) names this machine's loopback."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_allowed_host(host: str) -> bool:
    """Loopback, or an address in a network given to :func:`allow_network`."""
    if is_loopback_host(host):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return any(address in network for network in _ALLOWED_NETWORKS)


def parse_address(address: str, field: str) -> tuple[str, int]:
    """Split ``host:port`` (``[::1]:port`` for IPv6), insisting on a loopback host.

    ``localhost`` becomes ``127.0.0.1`` so that port 0 binds one socket, as Go's listener
    does, rather than one per address family with two different ports.
    """
    host, sep, port_text = address.rpartition(":")
    if not sep or not port_text.isdigit() or int(port_text) > 65535:
        raise ApiError(f"{field} must be host:port, got {address!r}", HTTPStatus.BAD_REQUEST)
    host = host.removeprefix("[").removesuffix("]")
    if not is_allowed_host(host):
        allowed = ", ".join(["127.0.0.0/8", "::1", "localhost",
                             *(str(n) for n in _ALLOWED_NETWORKS)])
        raise ApiError(
            f"{field} {address!r} is not a loopback address; this server only proxies "
            f"{allowed}",
            HTTPStatus.BAD_REQUEST,
        )
    return ("127.0.0.1" if host == "localhost" else host), int(port_text)


def format_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class Proxy:
    """One Toxiproxy proxy: listen address, upstream address, enabled flag and toxic chain."""

    def __init__(self, name: str, listen: str, upstream: str) -> None:
        parse_address(listen, "listen")
        parse_address(upstream, "upstream")
        self.name = name
        self.listen = listen
        self.upstream = upstream
        self.enabled = False
        self.toxics: list[Toxic] = []
        self._server: asyncio.Server | None = None
        self._generation = 0
        self._handlers: set[asyncio.Task[None]] = set()
        self._connections: set[Connection] = set()

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "listen": self.listen,
            "upstream": self.upstream,
            "enabled": self.enabled,
            "toxics": [toxic.to_json() for toxic in self.ordered_toxics()],
        }

    def ordered_toxics(self) -> list[Toxic]:
        """Upstream chain then downstream chain, each in the order toxics were added."""
        return [toxic for stream in Stream for toxic in self.toxics if toxic.stream is stream]

    async def start(self) -> None:
        if self.enabled:
            return
        host, port = parse_address(self.listen, "listen")
        self._generation += 1
        accept = functools.partial(self._accept, self._generation)
        try:
            self._server = await asyncio.start_server(accept, host, port)
        except OSError as error:
            raise bind_failed(self.listen, error) from None
        bound_host, bound_port = self._server.sockets[0].getsockname()[:2]
        self.listen = format_address(bound_host, bound_port)
        self.enabled = True
        log.info("proxy %s listening on %s, upstream %s", self.name, self.listen, self.upstream)

    async def stop(self) -> None:
        """Stop listening and close every live connection."""
        if not self.enabled or self._server is None:
            return
        self.enabled = False
        server, self._server = self._server, None
        server.close()
        for handler in list(self._handlers):
            handler.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        await server.wait_closed()
        log.info("proxy %s stopped", self.name)

    async def update(self, listen: str, upstream: str, enabled: bool) -> None:
        """Apply new settings; a changed address restarts the listener (and drops connections)."""
        parse_address(listen, "listen")
        parse_address(upstream, "upstream")
        if listen != self.listen or upstream != self.upstream:
            await self.stop()
            self.listen, self.upstream = listen, upstream
        if enabled:
            await self.start()
        else:
            await self.stop()

    def find_toxic(self, name: str) -> Toxic:
        for toxic in self.toxics:
            if toxic.name == name:
                return toxic
        raise toxic_not_found()

    def add_toxic(self, toxic: Toxic) -> None:
        if any(existing.name == toxic.name for existing in self.toxics):
            raise toxic_already_exists()
        self.toxics.append(toxic)
        for connection in self._connections:
            connection.links[toxic.stream].add(toxic)

    async def update_toxic(self, name: str, body: object) -> Toxic:
        old = self.find_toxic(name)
        new = toxic_updated(old, body)
        self.toxics[self.toxics.index(old)] = new
        for connection in list(self._connections):
            await connection.links[new.stream].update(new)
        return new

    async def remove_toxic(self, name: str) -> None:
        toxic = self.find_toxic(name)
        self.toxics.remove(toxic)
        for connection in list(self._connections):
            await connection.links[toxic.stream].remove(name)

    async def remove_all_toxics(self) -> None:
        for toxic in self.ordered_toxics():
            await self.remove_toxic(toxic.name)

    def _accept(
        self, generation: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """Start carrying a new client's bytes, unless the listener that took it is gone.

        The connection runs in a task of our own (not the one asyncio would make for a
        coroutine callback) so that stopping the proxy can cancel and await it.
        """
        if generation != self._generation or not self.enabled:
            writer.transport.abort()
            return
        handler = asyncio.create_task(self._carry(reader, writer))
        self._handlers.add(handler)
        handler.add_done_callback(self._handlers.discard)

    async def _carry(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Dial upstream for a new client and carry its bytes until either side is done."""
        connection: Connection | None = None
        try:
            host, port = parse_address(self.upstream, "upstream")
            try:
                async with asyncio.timeout(DIAL_TIMEOUT_SECONDS):
                    upstream = await asyncio.open_connection(host, port)
            except (OSError, TimeoutError) as error:
                log.warning(
                    "proxy %s: cannot reach upstream %s: %s", self.name, self.upstream, error
                )
                return
            connection = Connection((reader, writer), upstream, self.toxics)
            self._connections.add(connection)
            await connection.run()
        finally:
            if connection is None:
                writer.transport.abort()
                with contextlib.suppress(ConnectionError, OSError):
                    await writer.wait_closed()
            else:
                self._connections.discard(connection)
