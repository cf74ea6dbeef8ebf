"""The project's own Toxiproxy server, for machines where the real ``toxiproxy-server`` is absent.

It speaks Toxiproxy's HTTP API v2 (see :mod:`harness.net.toxiproxy_api`) on 127.0.0.1:8474 by
default, so toxiproxy-python, the Go client or curl drive it unchanged, and the harness can use
a real Toxiproxy whenever one is installed without changing a line. Run it with::

    python -m harness.net.toxiproxy_server --host 127.0.0.1 --port 8474

It prints ``listening on HOST:PORT`` once ready (``--port 0`` picks a free port and prints it),
and SIGTERM or SIGINT stop it cleanly: the API listener, every proxy listener and every proxied
connection are closed before it exits. Exit codes follow the harness: 0 after a clean stop,
2 for bad arguments, 3 when the API port cannot be bound.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import signal
import sys
from collections.abc import Sequence
from http import HTTPStatus

from harness.net.http11 import HttpError, Request, encode_response, read_request
from harness.net.ports import LOOPBACK
from harness.net.proxy import allow_network, is_allowed_host
from harness.net.toxiproxy_api import ToxiproxyApi

DEFAULT_PORT = 8474
IDLE_SECONDS = 60.0
CLOSE_GRACE_SECONDS = 1.0

log = logging.getLogger(__name__)


class ToxiproxyServer:
    """The HTTP front of :class:`ToxiproxyApi`, plus the lifecycle of everything it opened."""

    def __init__(self, host: str = LOOPBACK, port: int = DEFAULT_PORT) -> None:
        if not is_allowed_host(host):
            raise ValueError(f"--host must be a loopback address, got {host!r}")
        self.host = host
        self.port = port
        self.api = ToxiproxyApi()
        self._server: asyncio.Server | None = None
        self._clients: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Bind the API port; raises ``OSError`` if it is taken."""
        self._server = await asyncio.start_server(self._accept, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("Toxiproxy API listening on %s:%s", self.host, self.port)

    async def close(self) -> None:
        """Close the API listener and its connections, then every proxy and its connections."""
        if self._server is not None:
            self._server.close()
        for client in list(self._clients):
            client.cancel()
        await asyncio.gather(*self._clients, return_exceptions=True)
        await self.api.close()
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve a client in a task of our own, so that :meth:`close` can cancel and await it."""
        client = asyncio.create_task(self._serve_client(reader, writer))
        self._clients.add(client)
        client.add_done_callback(self._clients.discard)

    async def _serve_client(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            keep_alive = True
            while keep_alive:
                async with asyncio.timeout(IDLE_SECONDS):
                    request = await read_request(reader, writer)
                if request is None:
                    return
                keep_alive = request.keep_alive
                writer.write(await self._respond(request, keep_alive))
                await writer.drain()
        except HttpError as error:
            body = json.dumps({"error": error.message, "status": error.status}).encode()
            writer.write(encode_response(error.status, body, "application/json", keep_alive=False))
            with contextlib.suppress(ConnectionError):
                await writer.drain()
        except (ConnectionError, TimeoutError):
            pass
        finally:
            writer.close()
            try:
                async with asyncio.timeout(CLOSE_GRACE_SECONDS):
                    await writer.wait_closed()
            except TimeoutError:
                writer.transport.abort()
            except (ConnectionError, OSError):
                pass

    async def _respond(self, request: Request, keep_alive: bool) -> bytes:
        if request.headers.get("user-agent", "").startswith("Mozilla/"):
            # Toxiproxy refuses browsers, so a web page cannot drive a local API by CSRF.
            return encode_response(
                HTTPStatus.FORBIDDEN,
                b"User agent not allowed\n",
                "text/plain; charset=utf-8",
                keep_alive=keep_alive,
            )
        status, value = await self.api.handle(request.method, request.segments, request.body)
        log.debug("%s %s -> %s", request.method, request.target, status)
        if value is None:
            return encode_response(status, b"", None, keep_alive=keep_alive)
        if isinstance(value, bytes):
            return encode_response(status, value, "text/plain; charset=utf-8",
                                   keep_alive=keep_alive)
        body = json.dumps(value, separators=(",", ":")).encode() + b"\n"
        return encode_response(status, body, "application/json", keep_alive=keep_alive)


async def _main(host: str, port: int) -> int:
    server = ToxiproxyServer(host, port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        await server.start()
    except OSError as error:
        print(f"cannot listen on {host}:{port}: {error.strerror or error}", file=sys.stderr)
        return 3
    print(f"listening on {server.host}:{server.port}", flush=True)
    try:
        await stop.wait()
    finally:
        await server.close()
    log.info("stopped")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.net.toxiproxy_server",
        description="A Toxiproxy-API-compatible TCP fault proxy (loopback, or the private "
                    "networks given with --allow-network).",
    )
    parser.add_argument("--host", default=LOOPBACK,
                        help="API address (loopback, or in an --allow-network network)")
    parser.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help="API port; 0 picks a free one (default %(default)s)",
    )
    parser.add_argument(
        "--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"]
    )
    parser.add_argument(
        "--allow-network", action="append", default=[], metavar="CIDR",
        help="also listen on and proxy to this private network (repeatable; the docker "
             "backend's own network, with this server in a container on it)",
    )
    args = parser.parse_args(argv)
    for cidr in args.allow_network:
        try:
            allow_network(cidr)
        except ValueError as exc:
            parser.error(str(exc))
    if not is_allowed_host(args.host):
        parser.error(f"--host must be a loopback address or in --allow-network, "
                     f"got {args.host!r}")
    if not 0 <= args.port <= 65535:
        parser.error(f"--port must be 0..65535, got {args.port}")
    logging.basicConfig(
        level=args.log_level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    return asyncio.run(_main(args.host, args.port))


if __name__ == "__main__":
    sys.exit(main())
