"""``python -m harness.net.toxiproxy_server`` as users run it: starts, serves, stops cleanly."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import sys
import urllib.request

import pytest

from harness.net.ports import LOOPBACK, is_accepting

from .conftest import connect, recv_exactly


def start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "harness.net.toxiproxy_server", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def post(port: int, path: str, body: object) -> dict:
    request = urllib.request.Request(
        f"http://{LOOPBACK}:{port}{path}", data=json.dumps(body).encode(), method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.loads(response.read())


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_every_listener_and_connection(echo_server, signum):
    with start("--host", LOOPBACK, "--port", "0") as server:
        try:
            line = server.stdout.readline()
            assert line.startswith("listening on "), line + server.stderr.read()
            api_port = int(line.rsplit(":", 1)[1])
            proxy = post(api_port, "/proxies",
                         {"name": "p", "upstream": f"{LOOPBACK}:{echo_server.port}"})
            proxy_port = int(proxy["listen"].rsplit(":", 1)[1])
            with connect(proxy) as live:
                live.sendall(b"hi")
                assert recv_exactly(live, 2) == b"hi"
                server.send_signal(signum)
                assert server.wait(10) == 0, server.stderr.read()
                with contextlib.suppress(ConnectionResetError):
                    assert live.recv(10) == b"", "live connections are closed"
        finally:
            if server.poll() is None:
                server.kill()
                server.wait()
    assert not is_accepting(LOOPBACK, api_port)
    assert not is_accepting(LOOPBACK, proxy_port)


def test_busy_port_exits_3():
    with socket.create_server((LOOPBACK, 0)) as taken:
        port = taken.getsockname()[1]
        with start("--port", str(port)) as server:
            assert server.wait(10) == 3
            assert "cannot listen" in server.stderr.read()


def test_non_loopback_host_exits_2():
    with start("--host", "0.0.0.0", "--port", "0") as server:
        assert server.wait(10) == 2
        assert "loopback" in server.stderr.read()
