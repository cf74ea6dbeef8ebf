"""The Toxiproxy server processes: which one is chosen, and that each starts, says what it is,
and stops cleanly (``python -m harness.net.toxiproxy_server`` as users run it, too)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from harness import vendor
from harness.net import toxiproxy_process
from harness.net.ports import LOOPBACK, is_accepting
from harness.net.toxiproxy_api import VERSION
from harness.net.toxiproxy_process import (
    ToxiproxyProcess,
    ToxiproxyServerKind,
    ToxiproxyStartError,
    find_toxiproxy_server,
)

from .conftest import connect, recv_exactly


def fake_server(directory: Path) -> Path:
    """An executable named toxiproxy-server (never run: only the choice is tested)."""
    directory.mkdir(parents=True, exist_ok=True)
    binary = directory / "toxiproxy-server"
    binary.write_text("#!/bin/sh\nexit 1\n")
    binary.chmod(0o755)
    return binary


@pytest.fixture
def nowhere(monkeypatch, tmp_path):
    """No server anywhere: an empty project root, no env vars, an empty PATH."""
    root = tmp_path / "root"
    root.mkdir()
    monkeypatch.setattr(vendor, "project_root", lambda: root)
    for name in ("TOXIPROXY_SERVER", "KAFKA_HARNESS_VENDOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-path"))
    return root


def test_without_any_real_server_the_builtin_one_is_chosen(nowhere):
    assert find_toxiproxy_server() is None
    assert "bash ci/fetch_vendor.sh" in toxiproxy_process.missing_real_server_message()


def test_the_choice_goes_env_var_then_vendored_then_path(nowhere, monkeypatch, tmp_path):
    on_path = fake_server(tmp_path / "bin")
    monkeypatch.setenv("PATH", str(on_path.parent))
    assert find_toxiproxy_server() == on_path

    vendored = fake_server(nowhere / ".harness" / "vendor" / "bin")
    assert find_toxiproxy_server() == vendored

    monkeypatch.setenv("KAFKA_HARNESS_VENDOR", "elsewhere")  # relative to the project root
    moved = fake_server(nowhere / "elsewhere" / "bin")
    assert find_toxiproxy_server() == moved

    chosen = fake_server(tmp_path / "mine")
    monkeypatch.setenv("TOXIPROXY_SERVER", str(chosen))
    assert find_toxiproxy_server() == chosen


@pytest.mark.parametrize("make", [
    lambda path: path,  # missing
    lambda path: path.mkdir() or path,  # a directory
    lambda path: path.write_text("not executable") and path,
])
def test_a_bad_env_var_is_an_error_naming_it(nowhere, monkeypatch, tmp_path, make):
    fake_server(nowhere / ".harness" / "vendor" / "bin")  # would be found otherwise
    monkeypatch.setenv("TOXIPROXY_SERVER", str(make(tmp_path / "toxiproxy")))
    with pytest.raises(ToxiproxyStartError, match=r"\$TOXIPROXY_SERVER is .*not an executable"):
        find_toxiproxy_server()


@pytest.mark.parametrize("kind", ["real", "builtin"])
def test_each_server_says_what_it_is_and_stops_clean(tmp_path, kind):
    binary = None
    if kind == "real":
        binary = find_toxiproxy_server()
        if binary is None:
            pytest.fail(toxiproxy_process.missing_real_server_message(), pytrace=False)
    server = ToxiproxyProcess(tmp_path, binary)
    try:
        url = server.start()
        port = int(url.rsplit(":", 1)[1])
        pid = server.pid
        info = server.info
        assert info.url == url and is_accepting(LOOPBACK, port)
        if kind == "real":
            assert info.kind is ToxiproxyServerKind.REAL and info.binary == binary
            assert info.version == VERSION.partition("+")[0]
            assert info.describe() == f"real v{info.version}"
        else:
            assert info.kind is ToxiproxyServerKind.BUILTIN and info.binary is None
            assert (info.version, info.describe()) == (VERSION, "built-in")
    finally:
        server.stop()
    assert server.pid is None and not is_accepting(LOOPBACK, port)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


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
