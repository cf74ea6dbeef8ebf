"""Fixtures for the network tests: a Toxiproxy server, loopback upstreams, two API clients.

``toxiproxy_server`` is parametrized over both servers the harness can run, so every test using
it runs twice, through the same clients: ``real`` is Shopify's ``toxiproxy-server`` (the one
``ci/setup.sh`` builds; missing, those cases fail and say how to build it — CI always sets up
first, so a skip would hide that the real server was never tested), ``builtin`` is the project's
own server, run in-process on its own event loop in a background thread, so pytest still sees
any warning or unclosed resource it leaves behind. Each server is shared by the whole session;
every test starts from an empty server and deletes whatever proxies it made.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Protocol

import pytest
from toxiproxy import Toxiproxy
from toxiproxy.api import APIConsumer

from harness.net import toxiproxy_process
from harness.net.ports import LOOPBACK
from harness.net.toxiproxy_process import ToxiproxyProcess, ToxiproxyServerKind
from harness.net.toxiproxy_server import ToxiproxyServer

SERVERS = ["real", "builtin"]

builtin_only = pytest.mark.parametrize("toxiproxy_server", ["builtin"], indirect=True)
"""For a deliberate difference of the built-in server (say why at the test)."""
real_only = pytest.mark.parametrize("toxiproxy_server", ["real"], indirect=True)


class RunningServer(Protocol):
    """A Toxiproxy server under test: its API port and which server it is."""

    @property
    def port(self) -> int: ...

    @property
    def kind(self) -> ToxiproxyServerKind: ...


class ServerThread:
    """A :class:`ToxiproxyServer` on port 0, running on an event loop in a thread."""

    kind = ToxiproxyServerKind.BUILTIN

    def __init__(self) -> None:
        self.server = ToxiproxyServer(LOOPBACK, 0)
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=asyncio.run, args=(self._main(),), daemon=True)

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        await self.server.start()
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            await self.server.close()

    def __enter__(self) -> ServerThread:
        self._thread.start()
        assert self._ready.wait(10), "built-in Toxiproxy did not start"
        return self

    def __exit__(self, *exc_info: object) -> None:
        assert self._loop is not None and self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)
        assert not self._thread.is_alive(), "built-in Toxiproxy did not stop"

    @property
    def port(self) -> int:
        return self.server.port


class RealServer:
    """The real ``toxiproxy-server`` as the harness runs it (:class:`ToxiproxyProcess`)."""

    kind = ToxiproxyServerKind.REAL

    def __init__(self, process: ToxiproxyProcess) -> None:
        self.process = process

    @property
    def port(self) -> int:
        return int(self.process.url.rsplit(":", 1)[1])


class Api:
    """A minimal JSON client that shows raw status codes, unlike the toxiproxy-python client."""

    def __init__(self, port: int) -> None:
        self.port = port

    def request(
        self, method: str, path: str, body: object = None, *, raw: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, object]:
        payload = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        connection = http.client.HTTPConnection(LOOPBACK, self.port, timeout=10)
        try:
            connection.request(method, path, body=payload, headers=headers or {})
            response = connection.getresponse()
            data = response.read()
        finally:
            connection.close()
        is_json = data.strip().startswith((b"{", b"["))
        return response.status, (json.loads(data) if is_json else data)

    def get(self, path: str) -> tuple[int, object]:
        return self.request("GET", path)

    def post(self, path: str, body: object = None) -> tuple[int, object]:
        return self.request("POST", path, body)

    def patch(self, path: str, body: object) -> tuple[int, object]:
        return self.request("PATCH", path, body)

    def delete(self, path: str) -> tuple[int, object]:
        return self.request("DELETE", path)

    def create_proxy(self, name: str, upstream: int, **fields: object) -> dict:
        """A proxy on a free loopback port (the real server's default listen is every
        interface, so tests always say loopback)."""
        status, proxy = self.post(
            "/proxies", {"name": name, "upstream": f"{LOOPBACK}:{upstream}",
                         "listen": f"{LOOPBACK}:0", **fields}
        )
        assert status == 201, proxy
        return proxy

    def add_toxic(
        self, proxy: str, kind: str, stream: str = "downstream", **fields: object
    ) -> dict:
        status, toxic = self.post(
            f"/proxies/{proxy}/toxics", {"type": kind, "stream": stream, **fields}
        )
        assert status == 200, toxic
        return toxic


class Upstream:
    """A loopback TCP server running ``handle(conn)`` per connection in a thread."""

    def __init__(self, handle: Callable[[socket.socket], None]) -> None:
        self._handle = handle
        self._listener = socket.create_server((LOOPBACK, 0))
        self._listener.settimeout(0.05)
        self._closing = threading.Event()
        self.port = self._listener.getsockname()[1]
        self._threads: list[threading.Thread] = []
        self._connections: list[socket.socket] = []
        self._lock = threading.Lock()
        self._accepter = threading.Thread(target=self._accept_loop, daemon=True)
        self._accepter.start()

    def _accept_loop(self) -> None:
        while not self._closing.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            conn.settimeout(None)
            with self._lock:
                self._connections.append(conn)
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            self._handle(conn)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self._closing.set()
        self._accepter.join(5)
        self._listener.close()
        with self._lock:
            for conn in self._connections:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
        for thread in self._threads:
            thread.join(5)
        with self._lock:
            for conn in self._connections:
                conn.close()


def echo(conn: socket.socket) -> None:
    while data := conn.recv(65536):
        conn.sendall(data)


@pytest.fixture(scope="session", params=SERVERS)
def toxiproxy_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    if request.param == "builtin":
        with ServerThread() as running:
            yield running
        return
    binary = toxiproxy_process.find_toxiproxy_server()
    if binary is None:
        pytest.fail(toxiproxy_process.missing_real_server_message(), pytrace=False)
    process = ToxiproxyProcess(tmp_path_factory.mktemp("toxiproxy-real"), binary)
    process.start()
    try:
        yield RealServer(process)
    finally:
        process.stop()


@pytest.fixture
def api(toxiproxy_server: RunningServer) -> Iterator[Api]:
    client = Api(toxiproxy_server.port)
    status, proxies = client.get("/proxies")
    assert (status, proxies) == (200, {}), "a previous test left proxies behind"
    yield client
    _, proxies = client.get("/proxies")
    for name in proxies:
        client.delete(f"/proxies/{name}")


@pytest.fixture
def client(api: Api) -> Iterator[Toxiproxy]:
    """toxiproxy-python — what the harness itself drives — pointed at the server under test
    (its address is class state, restored afterwards)."""
    saved = APIConsumer.host, APIConsumer.port
    toxiproxy = Toxiproxy()
    toxiproxy.update_api_consumer(LOOPBACK, api.port)
    yield toxiproxy
    toxiproxy.update_api_consumer(*saved)


@pytest.fixture
def echo_server() -> Iterator[Upstream]:
    upstream = Upstream(echo)
    yield upstream
    upstream.close()


def connect(proxy: dict | object, timeout: float = 5.0) -> socket.socket:
    """A client socket to a proxy's listen address (an API answer or a toxiproxy-python
    ``Proxy``)."""
    listen = proxy["listen"] if isinstance(proxy, dict) else getattr(proxy, "listen")  # noqa: B009
    host, port = listen.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=timeout)


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        piece = sock.recv(size - len(data))
        if not piece:
            break
        data += piece
    return bytes(data)
