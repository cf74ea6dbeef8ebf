"""Loopback ports for processes the harness starts.

The kernel picks a free port when a socket binds port 0; the socket is then closed so the
process we start can bind it. Another process could take the port in between — a small race
the launchers accept, because the alternative (passing a bound socket to every peer) is not
something Tansu or a Kafka broker supports.
"""

from __future__ import annotations

import socket

LOOPBACK = "127.0.0.1"


def free_port(host: str = LOOPBACK) -> int:
    """Return a TCP port on ``host`` that nothing was listening on a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def is_accepting(host: str, port: int, timeout: float = 0.2) -> bool:
    """Whether a TCP connection to ``host:port`` succeeds within ``timeout`` seconds."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False
