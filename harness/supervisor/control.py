"""The supervisor's control socket: one JSON request per line in, one JSON response per line out.

Both ends live here so the protocol is in one place: :func:`send_request` is what every CLI
command calls, :class:`ControlServer` is what the supervisor (:mod:`harness.supervisor`)
serves. A response is ``{"ok": true, ...}`` or ``{"ok": false, "error": "...", "kind": "usage" |
"failed"}``; the socket file exists exactly while a supervisor serves it.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import socketserver
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

SOCKET_NAME = "control.sock"
_MAX_REQUEST_BYTES = 1 << 20
# sun_path holds 108 bytes; longer paths are reached through a directory descriptor.
_MAX_SOCKET_PATH = 100


class NoCluster(RuntimeError):
    """No supervisor serves this run directory."""


def socket_path(run_dir: Path) -> Path:
    return run_dir / SOCKET_NAME


@contextlib.contextmanager
def unix_address(path: Path) -> Iterator[str]:
    """An address ``bind``/``connect`` accept for ``path``, even past sun_path's limit."""
    if len(os.fsencode(path)) < _MAX_SOCKET_PATH:
        yield str(path)
        return
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{directory}/{path.name}"
    finally:
        os.close(directory)


def send_request(run_dir: Path, request: dict[str, Any], timeout: float = 600.0) -> dict[str, Any]:
    """Send one request to the supervisor of ``run_dir`` and return its response.

    Raises :class:`NoCluster` when nothing serves the socket (never started, stopped, or a
    supervisor that died and left a stale socket file)."""
    path = socket_path(run_dir)
    if not path.exists():
        raise NoCluster(f"no cluster running in {run_dir}")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        try:
            with unix_address(path) as address:
                sock.connect(address)
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            raise NoCluster(f"no cluster running in {run_dir} (stale {SOCKET_NAME}: "
                            f"{exc.strerror})") from exc
        sock.sendall(json.dumps(request).encode() + b"\n")
        received = bytearray()
        while not received.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
    if not received:
        raise NoCluster(f"the supervisor of {run_dir} closed the connection without answering")
    return json.loads(received)


class _Handler(socketserver.StreamRequestHandler):
    server: ControlServer

    def handle(self) -> None:
        for line in self.rfile:
            if len(line) > _MAX_REQUEST_BYTES:
                response = {"ok": False, "kind": "usage", "error": "request too large"}
            else:
                try:
                    request = json.loads(line)
                except json.JSONDecodeError as exc:
                    request, response = None, {"ok": False, "kind": "usage",
                                               "error": f"not JSON: {exc}"}
                if request is not None:
                    response = (self.server.answer(request) if isinstance(request, dict)
                                else {"ok": False, "kind": "usage",
                                      "error": "a request is a JSON object"})
            self.wfile.write(json.dumps(response).encode() + b"\n")
            self.wfile.flush()


class ControlServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """Serves ``path``, answering each request with ``answer(request)`` (which never raises)."""

    daemon_threads = True

    def __init__(self, path: Path, answer: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        self.answer = answer
        path.unlink(missing_ok=True)
        with unix_address(path) as address:
            super().__init__(address, _Handler)
        os.chmod(path, 0o600)
